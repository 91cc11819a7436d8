//! The meter (issue 27): the built module, `dist/ratebound.wasm`, run under
//! the wasmi interpreter with fuel metering behind a fake proxy-wasm host
//! ([`host`]), so that the module's own work per request is a number that
//! is the same on every machine and every run: no timing.
//!
//! Fuel is wasmi's count of executed instructions (about one a Wasm
//! operator, more for bulk memory copies), spent only inside the module:
//! the host's own work is not in it. The host calls each request makes are
//! counted by kind beside it.

pub mod bench;
pub mod host;

pub use host::Host;
use std::collections::BTreeMap;
use std::path::PathBuf;
use wasmi::{CompilationMode, Config, Engine, Linker, Module, Store, TypedFunc};

/// Where the module is: `RATEBOUND_WASM`, else the repository's
/// `dist/ratebound.wasm` (`./build.sh` makes it).
pub fn module_path() -> PathBuf {
    std::env::var_os("RATEBOUND_WASM").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../dist/ratebound.wasm"),
        PathBuf::from,
    )
}

/// The module's bytes, or an error that says how to build it.
pub fn load_module() -> Result<Vec<u8>, String> {
    let path = module_path();
    std::fs::read(&path).map_err(|e| {
        format!(
            "{}: {e}: the meter measures the built module; run ./build.sh first \
             (or set RATEBOUND_WASM to a module)",
            path.display()
        )
    })
}

/// The module's imports, `module::name` each.
pub fn imports(wasm: &[u8]) -> Result<Vec<String>, String> {
    let engine = Engine::default();
    let module = Module::new(&engine, wasm).map_err(|e| e.to_string())?;
    Ok(module
        .imports()
        .map(|i| format!("{}::{}", i.module(), i.name()))
        .collect())
}

/// Fuel the store starts with: far more than any run spends.
const FUEL: u64 = u64::MAX / 4;
const ROOT: i32 = 1;
/// The host clock at the start: 2026-01-01T00:00:00Z.
pub const T0_NS: u64 = 1_767_225_600_000_000_000;

/// What one request cost.
#[derive(Debug, Clone, Default)]
pub struct Cost {
    /// Fuel spent in the module over the request's callbacks, allocations
    /// for buffers the host handed in included.
    pub fuel: u64,
    /// Of which in the module's allocator, for buffers the host handed in.
    pub alloc_fuel: u64,
    /// By callback: context create, request headers, response headers,
    /// log, done, delete.
    pub by_callback: [u64; 6],
    /// Host calls by kind.
    pub calls: BTreeMap<String, u64>,
    /// The status of the local reply sent, if one was.
    pub reply: Option<u32>,
    /// Bytes the module sent in call-outs: headers, body.
    pub call_bytes: (u64, u64),
}

/// A request's callbacks, in the order Envoy calls them (`Cost::by_callback`).
pub const CALLBACKS: [&str; 6] = [
    "context_create",
    "request_headers",  // and a call-out's answer, if it made one
    "response_headers", // and the response body's chunks, if any
    "log",
    "done",
    "delete",
];

/// One instance of the module, configured, behind the fake host.
pub struct Meter {
    store: Store<Host>,
    context_create: TypedFunc<(i32, i32), ()>,
    request_headers: TypedFunc<(i32, i32, i32), i32>,
    response_headers: TypedFunc<(i32, i32, i32), i32>,
    response_body: TypedFunc<(i32, i32, i32), i32>,
    call_answer: TypedFunc<(i32, i32, i32, i32, i32), ()>,
    log: TypedFunc<i32, ()>,
    done: TypedFunc<i32, i32>,
    delete: TypedFunc<i32, ()>,
    tick: TypedFunc<i32, ()>,
    next_context: i32,
    next_tick_ns: u64,
    /// Fuel spent, and host calls made, in ticks (`proxy_on_tick`).
    pub tick_fuel: u64,
    pub ticks: u64,
    pub tick_calls: BTreeMap<String, u64>,
    /// Fuel spent starting and configuring the module.
    pub start_fuel: u64,
    /// The upstream's answer besides `:status: 200`: its headers, and its
    /// body's chunks (none: the headers end the response).
    pub response: Vec<(String, Vec<u8>)>,
    pub body: Vec<Vec<u8>>,
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl Meter {
    /// Instantiates the module behind a fresh host prepared by `prepare`
    /// (its properties, say), then starts it as Envoy does: `_initialize`
    /// (or `_start`), the root context, `proxy_on_vm_start` and
    /// `proxy_on_configure` with `config` as the plugin configuration.
    pub fn new(
        wasm: &[u8],
        config: &str,
        prepare: impl FnOnce(&mut Host),
    ) -> Result<Meter, String> {
        let mut cfg = Config::default();
        cfg.consume_fuel(true);
        // Eager: lazy translation would charge fuel for compiling a function
        // the first time it runs.
        cfg.compilation_mode(CompilationMode::Eager);
        let engine = Engine::new(&cfg);
        let module = Module::new(&engine, wasm).map_err(err)?;
        let mut linker = Linker::<Host>::new(&engine);
        let defined = host::define(&mut linker).map_err(err)?;
        // Anything else the module imports traps, naming itself, if called.
        for import in module.imports() {
            let (m, n) = (import.module().to_string(), import.name().to_string());
            if defined.iter().any(|(dm, dn)| *dm == m && *dn == n) {
                continue;
            }
            let Some(ty) = import.ty().func().cloned() else {
                return Err(format!("import {m}::{n} is not a function"));
            };
            let (mm, nn) = (m.clone(), n.clone());
            linker
                .func_new(&m, &n, ty, move |_, _, _| {
                    Err(wasmi::Error::new(format!(
                        "the fake host has no {mm}::{nn}"
                    )))
                })
                .map_err(err)?;
        }
        let mut h = Host::new(T0_NS);
        h.plugin_config = config.as_bytes().to_vec();
        prepare(&mut h);
        let mut store = Store::new(&engine, h);
        store.set_fuel(FUEL).map_err(err)?;
        let instance = linker
            .instantiate_and_start(&mut store, &module)
            .map_err(err)?;
        store.data_mut().memory = instance.get_memory(&store, "memory");
        store.data_mut().alloc = instance
            .get_typed_func::<i32, i32>(&store, "proxy_on_memory_allocate")
            .or_else(|_| instance.get_typed_func::<i32, i32>(&store, "malloc"))
            .ok();
        macro_rules! export {
            ($name:literal) => {
                instance
                    .get_typed_func(&store, $name)
                    .map_err(|e| format!("export {}: {e}", $name))?
            };
        }
        for init in ["_initialize", "_start"] {
            if let Ok(f) = instance.get_typed_func::<(), ()>(&store, init) {
                f.call(&mut store, ()).map_err(err)?;
                break;
            }
        }
        let vm_start: TypedFunc<(i32, i32), i32> = export!("proxy_on_vm_start");
        let configure: TypedFunc<(i32, i32), i32> = export!("proxy_on_configure");
        let mut meter = Meter {
            context_create: export!("proxy_on_context_create"),
            request_headers: export!("proxy_on_request_headers"),
            response_headers: export!("proxy_on_response_headers"),
            response_body: export!("proxy_on_response_body"),
            call_answer: export!("proxy_on_http_call_response"),
            log: export!("proxy_on_log"),
            done: export!("proxy_on_done"),
            delete: export!("proxy_on_delete"),
            tick: export!("proxy_on_tick"),
            store,
            next_context: ROOT + 1,
            next_tick_ns: 0,
            tick_fuel: 0,
            ticks: 0,
            tick_calls: BTreeMap::new(),
            start_fuel: 0,
            response: Vec::new(),
            body: Vec::new(),
        };
        let s = &mut meter.store;
        meter.context_create.call(&mut *s, (ROOT, 0)).map_err(err)?;
        if vm_start.call(&mut *s, (ROOT, 0)).map_err(err)? == 0 {
            return Err(meter.failed("proxy_on_vm_start returned false"));
        }
        let size = config.len() as i32;
        if configure.call(&mut *s, (ROOT, size)).map_err(err)? == 0 {
            return Err(meter.failed("proxy_on_configure returned false"));
        }
        meter.start_fuel = meter.fuel();
        let tick_ms = u64::from(meter.store.data().tick_ms);
        meter.next_tick_ns = T0_NS + tick_ms * 1_000_000;
        Ok(meter)
    }

    fn failed(&self, what: &str) -> String {
        let logs: Vec<String> = self
            .store
            .data()
            .logs
            .iter()
            .map(|(_, m)| m.clone())
            .collect();
        format!(
            "{what}; the module logged: {logs:?} {}",
            self.store.data().output
        )
    }

    /// Fuel spent so far.
    pub fn fuel(&self) -> u64 {
        FUEL - self.store.get_fuel().unwrap_or(FUEL)
    }

    pub fn host(&self) -> &Host {
        self.store.data()
    }

    pub fn host_mut(&mut self) -> &mut Host {
        self.store.data_mut()
    }

    /// Notes `label` in the trace, if one is on, with the fuel left.
    fn mark(&mut self, label: &str) {
        let fuel = self.store.get_fuel().unwrap_or(0);
        if let Some(t) = &mut self.store.data_mut().trace {
            t.push((label.to_string(), fuel));
        }
    }

    /// One request (as [`Meter::request`]) traced: the fuel the module
    /// spent from each callback's start or host call to the next, labelled
    /// by both ends, in order.
    pub fn trace(&mut self) -> Result<Vec<(String, u64)>, String> {
        self.store.data_mut().trace = Some(Vec::new());
        let cost = self.request();
        let trace = self.store.data_mut().trace.take().unwrap_or_default();
        cost?;
        Ok(trace
            .windows(2)
            .map(|w| (format!("{} -> {}", w[0].0, w[1].0), w[0].1 - w[1].1))
            .collect())
    }

    /// Moves the host clock on by `ms`, running the ticks that fall due
    /// (their cost is kept apart from the requests').
    pub fn advance(&mut self, ms: u64) -> Result<(), String> {
        self.store.data_mut().now_ns += ms * 1_000_000;
        let tick_ms = u64::from(self.store.data().tick_ms);
        while tick_ms > 0 && self.store.data().now_ns >= self.next_tick_ns {
            self.next_tick_ns += tick_ms * 1_000_000;
            let before = self.fuel();
            std::mem::take(&mut self.store.data_mut().calls);
            self.tick.call(&mut self.store, ROOT).map_err(err)?;
            self.tick_fuel += self.fuel() - before;
            self.ticks += 1;
            for (k, n) in std::mem::take(&mut self.store.data_mut().calls) {
                *self.tick_calls.entry(k).or_default() += n;
            }
        }
        Ok(())
    }

    /// One whole request as Envoy runs it through the filter: a context,
    /// its request headers (the whole request: end of stream), the answer
    /// to the call-out they made, if they made one (the host's
    /// `answer_*`), the response headers (the upstream's ":status: 200", or the local
    /// reply's), the access log, done and delete.
    pub fn request(&mut self) -> Result<Cost, String> {
        let ctx = self.next_context;
        self.next_context += 1;
        let h = self.store.data_mut();
        h.calls.clear();
        h.replies.clear();
        h.alloc_fuel = 0;
        h.call_bytes = (0, 0);
        // A root context's call (a tick's) is never answered here.
        h.pending_call = None;
        h.response_headers = vec![(":status".into(), b"200".to_vec())];
        h.response_headers.extend(self.response.iter().cloned());
        let body = self.body.clone();
        let n_headers = h.request_headers.len() as i32;
        let mut cost = Cost::default();
        let start = self.fuel();
        let mut mark = start;
        for (i, name) in CALLBACKS.iter().enumerate() {
            self.mark(&format!("proxy_on_{name}"));
            let s = &mut self.store;
            match i {
                0 => self.context_create.call(&mut *s, (ctx, ROOT)),
                1 => {
                    let r = self.request_headers.call(&mut *s, (ctx, n_headers, 1));
                    match (r, s.data_mut().pending_call.take()) {
                        (Ok(_), Some(token)) => {
                            self.mark("proxy_on_http_call_response");
                            let s = &mut self.store;
                            let h = s.data();
                            let sizes = (
                                h.answer_headers.len() as i32,
                                h.answer_body.len() as i32,
                                h.answer_trailers.len() as i32,
                            );
                            self.call_answer
                                .call(&mut *s, (ctx, token as i32, sizes.0, sizes.1, sizes.2))
                        }
                        (r, _) => r.map(drop),
                    }
                }
                2 => {
                    let n = s.data().response_headers.len() as i32;
                    let eos = i32::from(body.is_empty());
                    let mut r = self.response_headers.call(&mut *s, (ctx, n, eos)).map(drop);
                    for (k, chunk) in body.iter().enumerate() {
                        let last = i32::from(k + 1 == body.len());
                        s.data_mut().body_chunk.clone_from(chunk);
                        let size = chunk.len() as i32;
                        r = r.and_then(|()| {
                            self.response_body
                                .call(&mut *s, (ctx, size, last))
                                .map(drop)
                        });
                    }
                    r
                }
                3 => self.log.call(&mut *s, ctx),
                4 => self.done.call(&mut *s, ctx).map(drop),
                _ => self.delete.call(&mut *s, ctx),
            }
            .map_err(|e| self.failed(&format!("proxy_on_{name}: {e}")))?;
            let now = self.fuel();
            cost.by_callback[i] = now - mark;
            mark = now;
        }
        self.mark("the end");
        cost.fuel = self.fuel() - start;
        let h = self.store.data_mut();
        cost.alloc_fuel = h.alloc_fuel;
        cost.calls = std::mem::take(&mut h.calls);
        cost.reply = h.replies.first().copied();
        cost.call_bytes = h.call_bytes;
        Ok(cost)
    }
}

/// base64url without padding (a JWT's parts).
fn b64url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// A token for `sub` whose own claims are the ones jwt_authn verified, as
/// the bench's (`bench/benchlib.py` make_jwt; the signature is not read).
pub fn token(sub: &str) -> String {
    format!(
        "{}.{}.sig",
        b64url(br#"{"alg":"RS256","kid":"bench"}"#),
        b64url(format!(r#"{{"iss":"bench","sub":"{sub}","exp":4102444800}}"#).as_bytes())
    )
}

/// Where jwt_authn puts a verified claim (`payload_in_metadata: payload`).
pub const JWT_SUB: &str = "metadata.filter_metadata.envoy.filters.http.jwt_authn.payload.sub";

/// A configuration the meter runs, and how its requests look.
pub struct Scenario {
    pub name: String,
    pub config: String,
    /// Distinct callers (source addresses), cycled through.
    pub callers: usize,
    /// The JWT user every request carries (variant 5), if any.
    pub jwt_user: Option<String>,
    /// Requests measured, after a warm-up of one round of every caller
    /// and three more.
    pub requests: usize,
    /// More request headers every request carries (a cost it names).
    pub headers: Vec<(String, Vec<u8>)>,
    /// The upstream's answer: headers besides `:status`, body chunks.
    pub response: Vec<(String, Vec<u8>)>,
    pub body: Vec<Vec<u8>>,
    /// The rate-limit service's answer to every call (a `RateLimitResponse`,
    /// unframed; [`bench::rls_answer`]): gRPC OK over HTTP/2 200.
    pub answer: Option<Vec<u8>>,
}

/// What a scenario's requests cost, on average.
#[derive(Debug, Clone)]
pub struct Measured {
    pub name: String,
    pub requests: usize,
    pub fuel: f64,
    pub alloc_fuel: f64,
    pub by_callback: [f64; 6],
    pub calls: BTreeMap<String, f64>,
    /// Share of the measured requests that were refused (a local reply).
    pub refused: f64,
    /// Bytes sent in call-outs per request: headers, body.
    pub call_bytes: (f64, f64),
    pub start_fuel: u64,
    pub ticks: u64,
    pub tick_fuel: u64,
}

impl Measured {
    pub fn total_calls(&self) -> f64 {
        self.calls.values().sum()
    }

    /// Host calls per request of every kind whose name starts with `prefix`.
    pub fn calls_of(&self, prefix: &str) -> f64 {
        self.calls
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(_, n)| n)
            .sum()
    }
}

/// The source address of caller `i` (Envoy's `source.address`: ip:port).
pub fn address(i: usize) -> String {
    format!(
        "10.{}.{}.{}:40000",
        (i >> 16) & 255,
        (i >> 8) & 255,
        i & 255
    )
}

/// Runs `s` on a fresh instance of `wasm`: one request a millisecond.
pub fn measure(wasm: &[u8], s: &Scenario) -> Result<Measured, String> {
    let mut m = Meter::new(wasm, &s.config, |h| {
        h.properties.insert("node.id".into(), b"meter".to_vec());
        if let Some(user) = &s.jwt_user {
            let bearer = format!("Bearer {}", token(user));
            h.request_headers
                .push(("authorization".into(), bearer.into_bytes()));
            h.properties
                .insert(JWT_SUB.into(), user.as_bytes().to_vec());
        }
        h.request_headers.extend(s.headers.iter().cloned());
        h.request_headers.extend([
            (":method".to_string(), b"GET".to_vec()),
            (":path".to_string(), b"/".to_vec()),
            (":authority".to_string(), b"bench".to_vec()),
        ]);
    })?;
    m.response.clone_from(&s.response);
    m.body.clone_from(&s.body);
    if let Some(msg) = &s.answer {
        let h = m.host_mut();
        h.answer_headers = vec![
            (":status".into(), b"200".to_vec()),
            ("content-type".into(), b"application/grpc".to_vec()),
        ];
        // One uncompressed gRPC frame.
        h.answer_body = [&[0u8][..], &(msg.len() as u32).to_be_bytes(), msg].concat();
        h.answer_trailers = vec![("grpc-status".into(), b"0".to_vec())];
    }
    let callers = s.callers.max(1);
    let run = |m: &mut Meter, i: usize| -> Result<Cost, String> {
        let addr = address(i % callers).into_bytes();
        m.host_mut()
            .properties
            .insert("source.address".into(), addr);
        let cost = m.request()?;
        m.advance(1)?;
        Ok(cost)
    };
    let warm = callers + 3;
    for i in 0..warm {
        run(&mut m, i)?;
    }
    let (ticks, tick_fuel) = (m.ticks, m.tick_fuel);
    let mut fuel = 0u64;
    let mut alloc = 0u64;
    let mut by = [0u64; 6];
    let mut calls: BTreeMap<String, u64> = BTreeMap::new();
    let mut refused = 0usize;
    let mut sent = (0u64, 0u64);
    for i in warm..warm + s.requests {
        let c = run(&mut m, i)?;
        sent = (sent.0 + c.call_bytes.0, sent.1 + c.call_bytes.1);
        fuel += c.fuel;
        alloc += c.alloc_fuel;
        for (b, f) in by.iter_mut().zip(c.by_callback) {
            *b += f;
        }
        for (k, n) in c.calls {
            *calls.entry(k).or_default() += n;
        }
        refused += usize::from(c.reply.is_some());
    }
    let n = s.requests as f64;
    Ok(Measured {
        name: s.name.clone(),
        requests: s.requests,
        fuel: fuel as f64 / n,
        alloc_fuel: alloc as f64 / n,
        by_callback: by.map(|f| f as f64 / n),
        calls: calls.into_iter().map(|(k, v)| (k, v as f64 / n)).collect(),
        refused: refused as f64 / n,
        call_bytes: (sent.0 as f64 / n, sent.1 as f64 / n),
        start_fuel: m.start_fuel,
        ticks: m.ticks - ticks,
        tick_fuel: m.tick_fuel - tick_fuel,
    })
}

#[cfg(test)]
mod tests {
    use super::b64url;

    #[test]
    fn base64url_without_padding() {
        assert_eq!(b64url(b""), "");
        assert_eq!(b64url(b"f"), "Zg");
        assert_eq!(b64url(b"fo"), "Zm8");
        assert_eq!(b64url(b"foo"), "Zm9v");
        assert_eq!(b64url(b"\xfb\xff"), "-_8");
    }
}

//! The floor of a rate-limit call from a Rust proxy-wasm filter: every
//! request makes one `ShouldRateLimit` call to envoyproxy/ratelimit with one
//! descriptor, `[("bound", BOUND), ("account", <the ACCOUNT header>)]`, the
//! same one Envoy's own `ratelimit` filter sends in bench/signin.sh, waits
//! for the answer, and goes on (OK) or answers 429 (OVER_LIMIT) or 500 (no
//! answer). Nothing else: no stats, no logs, no hashing.
//!
//! Its configuration is five words: `TRANSPORT CLUSTER DOMAIN BOUND ACCOUNT`.
//! TRANSPORT `grpc` uses the host's gRPC call (`proxy_grpc_call`); `http`
//! sends the same message framed as gRPC over an HTTP/2 call-out
//! (`proxy_http_call`), as ratebound does (docs/rate-limit-service.md, why).

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};
use std::rc::Rc;
use std::time::Duration;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        Box::new(Root { cfg: Rc::new(Cfg::default()) })
    });
}}

const SERVICE: &str = "envoy.service.ratelimit.v3.RateLimitService";
const METHOD: &str = "ShouldRateLimit";
const PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
const TIMEOUT: Duration = Duration::from_millis(1000);

#[derive(Default)]
struct Cfg {
    http: bool,
    cluster: String,
    domain: String,
    bound: String,
    account: String,
}

struct Root {
    cfg: Rc<Cfg>,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _: usize) -> bool {
        let text = self
            .get_plugin_configuration()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let w: Vec<&str> = text.split_whitespace().collect();
        let [transport, cluster, domain, bound, account] = w[..] else {
            return false;
        };
        self.cfg = Rc::new(Cfg {
            http: transport == "http",
            cluster: cluster.into(),
            domain: domain.into(),
            bound: bound.into(),
            account: account.into(),
        });
        true
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }

    fn create_http_context(&self, _: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Call {
            cfg: self.cfg.clone(),
        }))
    }
}

struct Call {
    cfg: Rc<Cfg>,
}

/// Appends a length-delimited protobuf field.
fn field(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag);
    let mut n = bytes.len();
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out.extend_from_slice(bytes);
}

/// `RateLimitRequest{domain, descriptors: [{entries: [(k, v)...]}]}`.
fn request(domain: &str, entries: &[(&str, &str)]) -> Vec<u8> {
    let mut descriptor = Vec::new();
    for (k, v) in entries {
        let mut entry = Vec::new();
        field(&mut entry, 0x0a, k.as_bytes());
        field(&mut entry, 0x12, v.as_bytes());
        field(&mut descriptor, 0x0a, &entry);
    }
    let mut msg = Vec::new();
    field(&mut msg, 0x0a, domain.as_bytes());
    field(&mut msg, 0x12, &descriptor);
    msg
}

/// `RateLimitResponse.overall_code` (field 1): the service writes it first.
fn over_limit(msg: &[u8]) -> bool {
    matches!(msg, [0x08, 2, ..])
}

impl Call {
    fn answer(&mut self, code: Option<bool>) {
        match code {
            Some(false) => self.resume_http_request(),
            Some(true) => self.send_http_response(429, vec![], None),
            None => self.send_http_response(500, vec![], None),
        }
    }
}

impl Context for Call {
    fn on_grpc_call_response(&mut self, _: u32, status: u32, size: usize) {
        let body = (status == 0)
            .then(|| self.get_grpc_call_response_body(0, size))
            .flatten();
        self.answer(body.map(|b| over_limit(&b)));
    }

    fn on_http_call_response(&mut self, _: u32, _: usize, size: usize, _: usize) {
        let body = self.get_http_call_response_body(0, size);
        self.answer(body.and_then(|b| b.get(5..).map(over_limit)));
    }
}

impl HttpContext for Call {
    fn on_http_request_headers(&mut self, _: usize, _: bool) -> Action {
        let account = self
            .get_http_request_header(&self.cfg.account)
            .unwrap_or_default();
        let c = &self.cfg;
        let msg = request(&c.domain, &[("bound", &c.bound), ("account", &account)]);
        let token = if c.http {
            let mut framed = Vec::with_capacity(msg.len() + 5);
            framed.push(0);
            framed.extend_from_slice(&(msg.len() as u32).to_be_bytes());
            framed.extend_from_slice(&msg);
            let headers = vec![
                (":method", "POST"),
                (":path", PATH),
                (":authority", c.cluster.as_str()),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
            ];
            self.dispatch_http_call(&c.cluster, headers, Some(&framed), vec![], TIMEOUT)
        } else {
            self.dispatch_grpc_call(&c.cluster, SERVICE, METHOD, vec![], Some(&msg), TIMEOUT)
        };
        match token {
            Ok(_) => Action::Pause,
            Err(_) => {
                self.send_http_response(500, vec![], None);
                Action::Pause
            }
        }
    }
}

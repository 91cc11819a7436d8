//! A host-call cost probe: a filter that does exactly the host calls named in
//! its configuration (a JSON list such as `["address","shared"]`) on every
//! request, and nothing else. Benchmarked beside the do-nothing filter, each
//! probe variant prices one kind of host call in real traffic, which is what
//! ratebound's hot path is made of (BENCHMARKS.md, "Where the time goes").

use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, BufferType, ContextType, LogLevel, MapType};
use std::rc::Rc;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        Box::new(ProbeRoot { ops: Rc::new(Vec::new()) })
    });
}}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    /// `get_property(source.address)`.
    Address,
    /// `get_current_time`.
    Time,
    /// `get_map_value` of one request header (`:path`).
    Header,
    /// `get_shared_data` of a 28-byte value.
    SharedGet,
    /// `get_shared_data` then a CAS `set_shared_data` of the same 28 bytes.
    Shared,
    /// `set_shared_data` of 28 bytes alone (ratebound's write when its
    /// worker remembers the value and cas, see src/write_memory.rs).
    SharedSet,
    /// Three response headers with `set_map_value` (replace).
    Replace3,
    /// Three response headers with `add_map_value`.
    Add3,
    /// A 429 local reply with four headers and a 150-byte body.
    Refuse,
    /// A 429 local reply with four headers and no body.
    RefuseNoBody,
}

fn parse(config: &[u8]) -> Vec<Op> {
    let text = String::from_utf8_lossy(config);
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter_map(|w| match w {
            "address" => Some(Op::Address),
            "time" => Some(Op::Time),
            "header" => Some(Op::Header),
            "shared_get" => Some(Op::SharedGet),
            "shared" => Some(Op::Shared),
            "shared_set" => Some(Op::SharedSet),
            "replace3" => Some(Op::Replace3),
            "add3" => Some(Op::Add3),
            "refuse" => Some(Op::Refuse),
            "refuse_nobody" => Some(Op::RefuseNoBody),
            _ => None,
        })
        .collect()
}

const KEY: &str = "probe:k";
const HEADERS: [(&str, &str); 3] = [
    ("ratelimit-limit", "1000000000"),
    ("ratelimit-remaining", "999999999"),
    ("ratelimit-reset", "60"),
];
const BODY: &[u8] = br#"{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"route all, bound addr: 1 a day","route":"all","bound":"addr","retry_after":86400}"#;

struct ProbeRoot {
    ops: Rc<Vec<Op>>,
}

impl Context for ProbeRoot {}

impl RootContext for ProbeRoot {
    fn on_configure(&mut self, _: usize) -> bool {
        let config = hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX)
            .ok()
            .flatten()
            .unwrap_or_default();
        self.ops = Rc::new(parse(&config));
        let _ = hostcalls::set_shared_data(KEY, Some(&[7u8; 28]), None);
        true
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }

    fn create_http_context(&self, _: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Probe {
            ops: self.ops.clone(),
            refused: false,
        }))
    }
}

struct Probe {
    ops: Rc<Vec<Op>>,
    refused: bool,
}

impl Context for Probe {}

impl HttpContext for Probe {
    fn on_http_request_headers(&mut self, _: usize, _: bool) -> Action {
        let mut sink = 0usize;
        for op in self.ops.iter() {
            match op {
                Op::Address => {
                    sink += hostcalls::get_property(vec!["source", "address"])
                        .ok()
                        .flatten()
                        .map_or(0, |v| v.len());
                }
                Op::Time => {
                    sink += hostcalls::get_current_time().is_ok() as usize;
                }
                Op::Header => {
                    sink += hostcalls::get_map_value(MapType::HttpRequestHeaders, ":path")
                        .ok()
                        .flatten()
                        .map_or(0, |v| v.len());
                }
                Op::SharedGet | Op::Shared => {
                    if let Ok((value, cas)) = hostcalls::get_shared_data(KEY) {
                        let mut value = value.unwrap_or_default();
                        sink += value.len();
                        if *op == Op::Shared {
                            if let Some(b) = value.first_mut() {
                                *b = b.wrapping_add(1);
                            }
                            let _ = hostcalls::set_shared_data(KEY, Some(&value), cas);
                        }
                    }
                }
                Op::SharedSet => {
                    sink += hostcalls::set_shared_data(KEY, Some(&[sink as u8; 28]), None).is_ok()
                        as usize;
                }
                Op::Refuse | Op::RefuseNoBody => {
                    self.refused = true;
                    let mut headers = HEADERS.to_vec();
                    headers.push(("retry-after", "86400"));
                    let body = (*op == Op::Refuse).then_some(BODY);
                    let _ = hostcalls::send_http_response(429, headers, body);
                    return Action::Pause;
                }
                Op::Replace3 | Op::Add3 => {}
            }
        }
        std::hint::black_box(sink);
        Action::Continue
    }

    fn on_http_response_headers(&mut self, _: usize, _: bool) -> Action {
        if self.refused {
            return Action::Continue;
        }
        for op in self.ops.iter() {
            for (name, value) in HEADERS {
                let _ = match op {
                    Op::Replace3 => {
                        hostcalls::set_map_value(MapType::HttpResponseHeaders, name, Some(value))
                    }
                    Op::Add3 => hostcalls::add_map_value(MapType::HttpResponseHeaders, name, value),
                    _ => Ok(()),
                };
            }
        }
        Action::Continue
    }
}

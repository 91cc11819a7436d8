//! A do-nothing HTTP filter: every callback takes the SDK default
//! (`Action::Continue`). Whatever Envoy spends on it per request is the cost of
//! having a Rust proxy-wasm filter on the path at all.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{ContextType, LogLevel};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(NoopRoot) });
}}

struct NoopRoot;

impl Context for NoopRoot {}

impl RootContext for NoopRoot {
    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Noop))
    }
}

struct Noop;

impl Context for Noop {}

impl HttpContext for Noop {}

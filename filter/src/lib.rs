//! The thin layer over proxy-wasm: forwards Envoy's callbacks to the pure
//! core (`node` for a root context's life, `pipeline` for a request's) and
//! gives it what it asks of Envoy.

// The module aborts on a panic: an out-of-range index must be impossible,
// not unlikely.
#![deny(clippy::indexing_slicing)]

mod envoy;
mod metrics;
mod shared;

use envoy::Envoy;
use metrics::Metrics;
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, BufferType, ContextType, LogLevel};
use ratebound::count::lane::Table;
use ratebound::node::{Active, NodeHost, RootState};
use ratebound::pipeline::{Exchange, Step, Worker};
use shared::log;
use std::rc::Rc;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    std::panic::set_hook(Box::new(|info| {
        // Where, not what: a panic message can quote the data it choked on
        // (a string slice error prints the string), and no request value
        // may reach the log.
        let at = info
            .location()
            .map_or_else(String::new, |l| format!(" at {}:{}", l.file(), l.line()));
        log(LogLevel::Critical, &format!("ratebound panicked{at}"));
    }));
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        let random = Envoy::default().random()[0];
        Box::new(Root { node: RootState::new(random, Table::DEFAULT) })
    });
}}

/// A root context: its life is the node's (`ratebound::node`).
struct Root {
    node: RootState<Metrics>,
}

impl Context for Root {
    /// A fleet sync's call, or the warm-up call, was answered.
    fn on_http_call_response(&mut self, token: u32, headers: usize, body: usize, trailers: usize) {
        let mut host = Envoy {
            metrics: None,
            headers,
            trailers,
        };
        let _ = self.node.on_answer(&mut host, token, body);
    }

    fn on_done(&mut self) -> bool {
        self.node.done(&mut Envoy::default());
        true
    }
}

impl RootContext for Root {
    fn on_vm_start(&mut self, _: usize) -> bool {
        log(
            LogLevel::Info,
            &format!(
                "ratebound {} (commit {}) starting",
                env!("CARGO_PKG_VERSION"),
                env!("RATEBOUND_GIT_COMMIT")
            ),
        );
        #[cfg(feature = "selftest")]
        ratebound::pipeline::store_suite::report(
            &shared::SharedData,
            &format!("selftest{:x}", Envoy::default().random()[0]),
            |line| log(LogLevel::Info, line),
        );
        true
    }

    fn on_configure(&mut self, _: usize) -> bool {
        let bytes = hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX)
            .ok()
            .flatten()
            .unwrap_or_default();
        self.node.configure(&mut Envoy::default(), bytes)
    }

    fn on_tick(&mut self) {
        self.node.tick(&mut Envoy::default());
    }

    fn create_http_context(&self, _: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Request {
            active: self.node.for_request(),
            exchange: Exchange::default(),
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

/// A request context: its life is the pipeline's (`ratebound::pipeline`).
struct Request {
    active: Option<Rc<Active<Metrics>>>,
    exchange: Exchange,
}

impl Context for Request {
    /// The session service or the rate-limit service answered: a request
    /// waits for one call-out at a time.
    fn on_http_call_response(&mut self, _: u32, headers: usize, body_size: usize, trailers: usize) {
        let step = self.step((headers, trailers), |w, host, ex| {
            w.on_answer(host, ex, body_size)
        });
        if step == Action::Continue {
            let _ = hostcalls::resume_http_request();
        }
    }
}

impl Request {
    /// Runs one callback of the pipeline with this request's configuration
    /// and exchange; without a configuration the request goes on.
    fn step(
        &mut self,
        (headers, trailers): (usize, usize),
        f: impl FnOnce(Worker, &mut Envoy, &mut Exchange) -> Step,
    ) -> Action {
        let Some(active) = self.active.clone() else {
            return Action::Continue;
        };
        let mut host = Envoy {
            metrics: Some(&active.stats),
            headers,
            trailers,
        };
        match f(active.worker(), &mut host, &mut self.exchange) {
            Step::Continue => Action::Continue,
            Step::Pause => Action::Pause,
        }
    }
}

impl HttpContext for Request {
    fn on_http_request_headers(&mut self, _: usize, end_of_stream: bool) -> Action {
        self.step((0, 0), |w, host, ex| w.on_request(host, ex, end_of_stream))
    }

    fn on_http_request_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        self.step((0, 0), |w, host, ex| {
            w.on_request_body(host, ex, size, end_of_stream)
        })
    }

    fn on_http_request_trailers(&mut self, _: usize) -> Action {
        self.step((0, 0), |w, host, ex| w.on_request_trailers(host, ex))
    }

    fn on_http_response_headers(&mut self, _: usize, _: bool) -> Action {
        self.step((0, 0), |w, host, ex| w.on_response(host, ex))
    }

    fn on_http_response_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        self.step((0, 0), |w, host, ex| {
            w.on_response_body(host, ex, size, end_of_stream)
        })
    }

    fn on_http_response_trailers(&mut self, _: usize) -> Action {
        self.step((0, 0), |w, host, ex| w.on_response_trailers(host, ex))
    }

    fn on_log(&mut self) {
        self.step((0, 0), |w, host, ex| {
            w.on_done(host, ex);
            Step::Continue
        });
    }
}

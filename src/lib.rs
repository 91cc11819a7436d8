//! ratebound: sliding-window rate limits per caller for Envoy (proxy-wasm).
//!
//! Everything that decides is plain Rust that takes `now` as an argument;
//! only the filter crate (filter/, compiled for wasm32) talks to Envoy.

// The module aborts on a panic: an out-of-range index must be impossible,
// not unlikely. Tests may index.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

// The flow of a request: `config` (what users wrote, compiled into a plan
// that matches requests), `pipeline` (the decision sequence, over a `Host`
// seam), `identity` (who the caller is), `count` (windows, counters in
// shared data), `reply` (what the client is told). `reading` says what a
// configuration means; the filter crate (filter/) is the only proxy-wasm
// code.
pub mod config;
pub mod count;
pub mod identity;
// Its warnings (and their words) also run in the module, once at configure
// time; the rest serves the CLI and the browser (`reading/mod.rs` says which
// part is which).
pub mod reading;
// A root context's life (configure, ticks, the fleet sync, the
// directory), over a `NodeHost` seam.
pub mod node;
pub mod pipeline;
pub mod reply;
// The rate-limit service's protocol (installation bounds).
pub mod rls;
// Every stat's name and kind, and the names' grammar (the filter's, `top`'s).
pub mod stats;

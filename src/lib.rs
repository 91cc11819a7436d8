//! ratebound: sliding-window rate limits per caller for Envoy (proxy-wasm).
//!
//! Everything that decides is plain Rust that takes `now` as an argument;
//! only `host` (compiled for wasm32) talks to Envoy.

// The module aborts on a panic: an out-of-range index must be impossible,
// not unlikely. Tests may index.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

pub mod accuracy;
pub mod address;
pub mod budget;
pub mod config;
// The CLI's own code, never in the module.
#[allow(clippy::indexing_slicing)]
pub mod console;
pub mod duration;
pub mod headers;
pub mod identity;
pub mod identity_cache;
pub mod jwt_token;
pub mod lanes;
pub mod limiter;
pub mod normalize;
pub mod operations;
pub mod pipeline;
pub mod plan;
pub mod refusals;
pub mod rls;
pub mod slots;
pub mod store;
#[cfg(any(test, feature = "selftest"))]
pub mod store_suite;
pub mod window;
pub mod write_memory;

// Not in test builds: `cargo test --target wasm32-wasip1` runs the pure
// core's tests as a plain WASI program (scripts/wasi-runner.mjs).
#[cfg(all(target_arch = "wasm32", not(test)))]
mod host;

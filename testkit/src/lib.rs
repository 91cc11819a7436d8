//! What the core is measured against, over its public API and never in the
//! module or the CLI: [`accuracy`] (how far the two-window estimate is from
//! an exact sliding log) and [`fleet_sim`] (a simulated fleet and
//! rate-limit service, to measure fleet bounds). The examples print their
//! figures (`examples/accuracy.rs`, `examples/fleet_accuracy.rs`) and the
//! property tests check them (`tests/properties.rs`).
//!
//! The in-memory store, the mock hosts and the store suite stay in the core
//! behind its `test-support` feature: the core's own unit tests stand on
//! them.

pub mod accuracy;
pub mod fleet_sim;

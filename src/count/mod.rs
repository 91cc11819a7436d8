//! Counting: the sliding-window arithmetic, where counters live in shared
//! data, and the per-worker memories that save reads.
//!
//! - [`window`]: the two-window estimate as pure functions of counts and now;
//! - [`store`]: the one door to counter storage (get, compare-and-swap set);
//! - [`slots`] and [`lanes`]: which keys a bound's counters use;
//! - [`limiter`]: every bound of a route, read then committed;
//! - [`write_memory`] and [`refusals`]: what a worker remembers to skip reads;
//! - [`locks`]: callers the rate-limit service locked out, until their window ends;
//! - [`fleet`]: fleet bounds, the synced fleet count plus this node's hits;
//! - [`fleet_lane`]: where a fleet bound's counts live, and what a sync takes;
//! - [`fleet_sim`]: a simulated fleet and service, to measure fleet bounds;
//! - [`accuracy`]: how far the estimate is from an exact log (tests, example).

pub mod accuracy;
pub mod fleet;
pub mod fleet_lane;
pub mod fleet_sim;
pub mod lanes;
pub mod limiter;
pub mod locks;
pub mod refusals;
pub mod slots;
pub mod store;
// A test suite (also built into the selftest module): it may index.
#[cfg(any(test, feature = "selftest"))]
#[allow(clippy::indexing_slicing)]
pub mod store_suite;
pub mod window;
pub mod write_memory;

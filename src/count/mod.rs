//! Counting: the sliding-window arithmetic, where counters live in shared
//! data, and the per-worker memories that save reads.
//!
//! - [`window`]: the two-window estimate as pure functions of counts and now;
//! - [`bytes`]: the little-endian fields values are written in;
//! - [`budget`]: the shared-data keys a configuration, and a vm_id, may create;
//! - [`store`]: the one door to counter storage (get, compare-and-swap set);
//! - [`lane`]: which keys a bound's counters use, and the compare-and-swap
//!   that records a request in them;
//! - [`node_lane`] and [`fleet_lane`]: the entries of a node bound's lane and
//!   of a fleet bound's; [`lane_upkeep`]: taking back and sweeping either;
//! - [`directory`]: the lanes a vm_id has given out, and to which configurations;
//! - [`write_memory`] and [`refusals`]: what a worker remembers to skip reads;
//! - [`locks`]: callers the rate-limit service locked out, until their window ends;
//! - [`fleet`]: fleet bounds, the synced fleet count plus this node's hits;
//!
//! Test support (`cfg(test)` or the `test-support` feature, never in the
//! module): `mem_store` (an in-memory store). The models the engine is
//! measured against are the testkit's (testkit/).

pub mod budget;
pub mod bytes;
pub mod directory;
pub mod fleet;
pub mod fleet_lane;
pub mod lane;
pub mod lane_upkeep;
pub mod locks;
#[cfg(any(test, feature = "test-support"))]
pub mod mem_store;
pub mod node_lane;
pub mod refusals;
pub mod store;
pub mod window;
pub mod write_memory;

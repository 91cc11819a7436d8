//! Fleet bounds: one budget for every node, decided on each node from what
//! the rate-limit service last said plus what this node admitted since, so
//! no request waits for a call. How the counts cross window boundaries, and
//! why each rule errs towards refusing, is in docs/fleet.md.
//!
//! - [`counts`]: one key's counts and the decision they give;
//! - [`record`]: the node's sync lease and node-counting heartbeat.

pub mod counts;
pub mod record;

pub use counts::*;
pub use record::*;

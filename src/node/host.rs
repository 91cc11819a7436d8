//! What the node asks of its host: the [`NodeHost`] seam, and the stats it
//! keeps per configuration ([`NodeStat`]).

use crate::config::plan::{BoundId, Plan, RouteId};
use crate::pipeline::Base;

/// What the node counts, into the stats of the configuration it is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeStat {
    StoreError,
    /// The nodes the fleet record counts.
    FleetNodes(u32),
    /// A fleet sync call sent with this many keys.
    FleetSyncSent(usize),
    FleetSyncFailed,
    /// Costs owed to the rate-limit service that it did not count.
    CostsUnsent(u64),
    /// Fleet decisions made alone since the last housekeeping.
    FleetAlone(u64),
    /// Write memory: decisions it saved a read for, and stale memories.
    WriteMemory(u64, u64),
    /// The housekeeping's end: counters gathered since are written.
    Flush,
    /// Callers tracked by bound `bound` of route `route`.
    Tracked {
        route: RouteId,
        bound: BoundId,
        n: u32,
    },
}

/// A configuration's stats, as the host keeps them.
pub trait NodeStats {
    fn count(&self, stat: NodeStat);
}

/// What a root context needs of Envoy, beyond [`Base`].
pub trait NodeHost: Base {
    type Stats: NodeStats;
    /// Random bits (a new directory's keys).
    fn random(&mut self) -> [u64; 2];
    /// An environment variable of the VM (a secret named by `env`).
    fn env_var(&self, name: &str) -> Option<String>;
    /// Defines the stats of a configuration about to be put in force.
    fn define_stats(&mut self, plan: &Plan) -> Self::Stats;
    fn set_tick_period(&mut self, ms: u64);
}

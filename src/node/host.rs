//! What the node asks of its host: the [`NodeHost`] seam, and the stats it
//! keeps per configuration ([`NodeStat`]).

use crate::config::plan::{BoundId, Plan, RouteId};
use crate::count::store::Store;
use crate::pipeline::installation::ServiceCall;
use crate::pipeline::Level;

/// What the node counts, into the stats of the configuration it is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeStat {
    StoreError,
    /// The nodes the fleet record counts.
    FleetNodes(u32),
    /// A fleet sync call sent with this many keys.
    FleetSyncSent(usize),
    FleetSyncFailed,
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

/// What a root context needs of Envoy.
pub trait NodeHost {
    type Store: Store;
    type Stats: NodeStats;
    /// Counter storage (Envoy shared data).
    fn store(&self) -> &Self::Store;
    /// Milliseconds since the epoch.
    fn now_ms(&self) -> u64;
    /// Random bits (a new directory's keys).
    fn random(&mut self) -> [u64; 2];
    /// An environment variable of the VM (a secret named by `env`).
    fn env_var(&self, name: &str) -> Option<String>;
    fn property(&self, path: Vec<&str>) -> Option<Vec<u8>>;
    /// Defines the stats of a configuration about to be put in force.
    fn define_stats(&mut self, plan: &Plan) -> Self::Stats;
    /// Dispatches a call to the rate-limit service: its token, or the
    /// host's status name.
    fn dispatch(&mut self, call: &ServiceCall) -> Result<u32, String>;
    /// The `grpc-message` of the answer being handled (trailers first).
    fn call_grpc_message(&self) -> Option<String>;
    /// The first `size` bytes of the answer being handled, as framed.
    fn call_body(&self, size: usize) -> Option<Vec<u8>>;
    fn set_tick_period(&mut self, ms: u64);
    fn log(&mut self, level: Level, msg: &str);
}

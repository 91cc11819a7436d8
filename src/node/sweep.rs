//! The caller tables' sweep, a chunk of buckets a second.

use super::{Active, NodeHost, NodeStat, NodeStats};
use crate::count::{lane, lane_upkeep};
use crate::pipeline::Level;

/// Buckets swept per caller table per tick: a full sweep every 5 s.
pub(crate) const SWEEP_CHUNK: usize = 256;

/// Sweeps expired callers out of the caller tables that track any, a chunk
/// of buckets each, and writes the tracked gauges. Idle tables cost one
/// read. Every VM of the configuration in force does it, each second the
/// same chunk: reads only, but for the entries that expired (the first VM
/// removes them), so no VM's sweep moves the host's cas counter for
/// nothing.
pub fn sweep<H: NodeHost>(host: &mut H, active: &Active<impl NodeStats>, now: u64) {
    let period = now / 1_000;
    for (route, bound, b, lane) in active.limiter.bound_lanes() {
        {
            let Some(table) = lane.table else { continue };
            let mut n = match lane::tracked(host.store(), lane) {
                Ok(n) => n,
                Err(e) => {
                    active.stats.count(NodeStat::StoreError);
                    host.log(Level::Warn, &format!("ratebound sweep: {e}"));
                    continue;
                }
            };
            if n > 0 {
                let chunks = table.buckets.div_ceil(SWEEP_CHUNK).max(1) as u64;
                let start = ((period % chunks) as usize) * SWEEP_CHUNK;
                match lane_upkeep::sweep(host.store(), lane, start..start + SWEEP_CHUNK, now) {
                    Ok(removed) => n = n.saturating_sub(removed),
                    Err(e) => {
                        active.stats.count(NodeStat::StoreError);
                        host.log(Level::Warn, &format!("ratebound sweep: {e}"));
                    }
                }
            }
            // Every tier of a shared lane tracks the same callers.
            for bound in crate::pipeline::limiter::tier_bounds(bound, b) {
                active.stats.count(NodeStat::Tracked { route, bound, n });
            }
        }
    }
}

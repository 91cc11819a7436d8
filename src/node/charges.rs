//! Sends the costs this worker's requests owe the rate-limit service
//! (`pipeline::owed`): at each tick, the whole queue, a batch a call. A
//! call that fails is not sent again (it may have been counted): its
//! charges are counted as unsent, as are charges a full queue dropped.

use super::{Active, NodeHost, NodeStat, NodeStats, RootState};
use crate::pipeline::owed::{self, OWED_MAX};
use crate::pipeline::Level;

/// Calls a tick sends at most: the queue's whole size.
const CALLS_PER_TICK: usize = OWED_MAX / owed::CHARGES_PER_CALL;

impl<S: NodeStats> RootState<S> {
    pub(super) fn send_owed<H: NodeHost<Stats = S>>(&mut self, host: &mut H, active: &Active<S>) {
        let dropped = self
            .owed
            .try_borrow_mut()
            .map_or(0, |mut o| o.take_dropped());
        if dropped > 0 {
            active.stats.count(NodeStat::CostsUnsent(dropped));
        }
        for _ in 0..CALLS_PER_TICK {
            let batch = match self.owed.try_borrow_mut() {
                Ok(mut o) if !o.is_empty() => o.take_batch(),
                _ => return,
            };
            let Some(call) = owed::charge_call(&active.limiter.plan, &batch, host.now_ms()) else {
                // No service in the configuration now in force.
                active
                    .stats
                    .count(NodeStat::CostsUnsent(batch.len() as u64));
                continue;
            };
            match crate::pipeline::dispatch_rls(host, &call) {
                Ok(token) => {
                    self.charging.insert(token, batch.len());
                }
                Err(e) => {
                    host.log(
                        Level::Debug,
                        &format!("ratebound: owed costs not sent to {:?}: {e}", call.cluster),
                    );
                    // Never reached the service: tried again at the next tick.
                    if let Ok(mut o) = self.owed.try_borrow_mut() {
                        o.put_back(batch);
                    }
                    return;
                }
            }
        }
    }

    /// A charge call ended with `grpc_status` (0: counted); false for a
    /// token that is not one.
    pub(super) fn charged<H: NodeHost<Stats = S>>(
        &mut self,
        host: &mut H,
        token: u32,
        grpc_status: u32,
    ) -> bool {
        let Some(n) = self.charging.remove(&token) else {
            return false;
        };
        if grpc_status != 0 {
            if let Some(active) = &self.active {
                active.stats.count(NodeStat::CostsUnsent(n as u64));
            }
            host.log(
                Level::Warn,
                &format!(
                    "ratebound: {n} owed costs not counted by the rate-limit service \
                     (grpc status {grpc_status})"
                ),
            );
        }
        true
    }
}

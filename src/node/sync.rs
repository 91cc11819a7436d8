//! The fleet sync driver: every `sync_ms`, if this context holds the node's
//! lease, every fleet key's unsent hits go to the rate-limit service
//! (`node::fleet_sync`); each call stays in flight, with the
//! configuration that sent it, until its answer is settled.

use super::{Active, NodeHost, NodeStat, NodeStats, RootState, TICK_SLACK_MS};
use crate::node::fleet_sync::{self, Batch, Settled};
use crate::pipeline::Level;
use crate::rls::GrpcCode;
use std::rc::Rc;

impl<S: NodeStats> RootState<S> {
    /// One fleet sync now, whatever the period (the lease still decides):
    /// what a tick does when the sync is due.
    pub fn sync<H: NodeHost<Stats = S>>(&mut self, host: &mut H) {
        if let Some(active) = self.active.clone().filter(|_| self.current) {
            let now = host.now_ms();
            self.sync_now(host, &active, now);
        }
    }

    /// Fleet bounds, and `sync_ms` since the last sync.
    pub(super) fn sync_due(&self, active: &Active<S>, now: u64) -> bool {
        let (Some(_), Some(service)) = (&active.limiter.fleet, &active.limiter.plan.service) else {
            return false;
        };
        now.saturating_sub(self.synced_ms) >= service.sync_ms.saturating_sub(TICK_SLACK_MS)
    }

    pub(super) fn sync_now<H: NodeHost<Stats = S>>(
        &mut self,
        host: &mut H,
        active: &Rc<Active<S>>,
        now: u64,
    ) {
        let stats = &active.stats;
        let record =
            match fleet_sync::claim(host.store(), &active.limiter, (self.me, active.gen), now) {
                Ok(Some(r)) => r,
                Ok(None) => return,
                Err(e) => {
                    stats.count(NodeStat::StoreError);
                    host.log(Level::Warn, &format!("ratebound fleet record: {e}"));
                    return;
                }
            };
        self.synced_ms = now;
        if let Some(n) = record.nodes(now) {
            stats.count(NodeStat::FleetNodes(n));
        }
        let node = self.node_id(host).to_string();
        let (batches, errors) =
            fleet_sync::collect(host.store(), &active.limiter, &record, &node, now);
        for e in errors {
            stats.count(NodeStat::StoreError);
            host.log(Level::Warn, &format!("ratebound fleet sync: {e}"));
        }
        for mut batch in batches {
            let Some(call) = batch.call(&active.limiter.plan) else {
                continue;
            };
            stats.count(NodeStat::FleetSyncSent(batch.keys()));
            match crate::pipeline::dispatch_rls(host, &call) {
                Ok(token) => {
                    self.syncs.insert(token, (Rc::clone(active), batch));
                }
                Err(e) => {
                    let msg = format!(
                        "ratebound: fleet sync call to {:?} not sent: {e}",
                        call.cluster
                    );
                    host.log(Level::Debug, &msg);
                    self.synced(host, active, &batch, GrpcCode::Unavailable.number(), 0);
                }
            }
        }
    }

    /// The node's stable id: Envoy's node id, the same for every run of
    /// the node, so a restart is not counted as one more node. Without one,
    /// this run's random id (each restart then counts until its minute ends).
    fn node_id<H: NodeHost<Stats = S>>(&mut self, host: &H) -> &str {
        if self.node.is_empty() {
            let text = |path| host.property(path).and_then(|b| String::from_utf8(b).ok());
            // The id itself, or the serialized Node message (its field 1).
            let message = |path| host.property(path).and_then(|b| fleet_sync::node_id_of(&b));
            let id = text(vec!["node", "id"])
                .or_else(|| text(vec!["xds", "node", "id"]))
                .filter(|id| !id.is_empty())
                .or_else(|| message(vec!["node"]))
                .or_else(|| message(vec!["xds", "node"]))
                .filter(|id| !id.is_empty() && id.len() <= 256);
            self.node = id.unwrap_or_else(|| format!("run-{:016x}", self.me));
        }
        &self.node
    }

    /// A sync call ended with `status` and a body of `body` bytes: settled
    /// against `active`, the configuration that sent it.
    pub(super) fn synced<H: NodeHost<Stats = S>>(
        &mut self,
        host: &mut H,
        active: &Active<S>,
        batch: &Batch,
        status: u32,
        body: usize,
    ) -> Settled {
        let framed = (status == 0).then(|| host.answer_body(body)).flatten();
        let message = framed.as_deref().and_then(|f| crate::rls::unframe(f).ok());
        let now = host.now_ms();
        let (settled, errors) =
            fleet_sync::settle(host.store(), &active.limiter, batch, status, message, now);
        for e in errors {
            active.stats.count(NodeStat::StoreError);
            host.log(Level::Warn, &format!("ratebound fleet sync: {e}"));
        }
        match &settled {
            Settled::Answered => {
                if std::mem::take(&mut self.sync_failing) {
                    host.log(Level::Info, "ratebound: fleet sync answered again");
                }
            }
            Settled::Failed(e) => {
                active.stats.count(NodeStat::FleetSyncFailed);
                if !std::mem::replace(&mut self.sync_failing, true) {
                    let msg = format!(
                        "ratebound: fleet sync failed ({e}); fleet bounds decide alone at \
                         limit / nodes until the service answers"
                    );
                    host.log(Level::Warn, &msg);
                }
            }
        }
        settled
    }
}

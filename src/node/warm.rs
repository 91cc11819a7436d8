//! Opening this worker's connection to the rate-limit service before its
//! first sign-in (`node::warm_up`): one call at a time, a tick apart,
//! until one is answered.

use super::{Active, NodeHost, NodeStats, RootState};
use crate::node::warm_up::{self, WarmUp};
use crate::pipeline::Level;
use crate::rls::GrpcCode;

impl<S: NodeStats> RootState<S> {
    pub(super) fn warm_up<H: NodeHost<Stats = S>>(&mut self, host: &mut H, active: &Active<S>) {
        if !self.warm.due() {
            return;
        }
        let Some(call) = warm_up::call(&active.limiter.plan) else {
            // No route calls the service: nothing to warm, at any tick.
            self.warm = WarmUp::Done { answered: false };
            return;
        };
        if let Err(e) = crate::pipeline::dispatch_rls(host, &call) {
            let msg = format!(
                "ratebound: warm-up call to {:?} not sent: {e}",
                call.cluster
            );
            host.log(Level::Debug, &msg);
            self.warm_up_answered(host, GrpcCode::Unavailable.number());
        }
    }

    /// The warm-up call ended with `status`; a warning when that was the
    /// last try.
    pub(super) fn warm_up_answered<H: NodeHost<Stats = S>>(&mut self, host: &mut H, status: u32) {
        if !self.warm.answered(status) {
            return;
        }
        let cluster = self
            .active
            .as_ref()
            .and_then(|a| a.limiter.plan.service.as_ref())
            .map_or("", |s| s.cluster.as_str());
        let msg = format!(
            "ratebound: the rate-limit service (cluster {cluster:?}) answered no warm-up call \
             in {} tries (last: gRPC status {status}); this worker's first sign-in opens \
             the connection",
            warm_up::TRIES
        );
        host.log(Level::Warn, &msg);
    }
}

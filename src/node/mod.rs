//! A root context's life, in plain Rust: the configuration in force and its
//! place in the lane directory, the housekeeping of each tick, the warm-up
//! of the rate-limit service connection and the fleet sync, over a
//! [`NodeHost`] seam (`host/` implements it over proxy-wasm,
//! [`mock::MockNodeHost`] records every call for native tests).
//!
//! - this file: the state and its callbacks (configure, tick, a call
//!   answered, done), the directory's join, leave and forgetting;
//! - `active`: a configuration put in force ([`Active`]);
//! - `sync`: the fleet sync driver and its calls in flight; [`fleet_sync`]:
//!   what a sync claims, sends and settles;
//! - `warm`: the warm-up calls, [`warm_up`] their state; `sweep`: the
//!   caller tables' sweep;
//! - `charges`: the costs owed to the rate-limit service, sent;
//! - `host`: the [`NodeHost`] seam and [`NodeStat`].

mod active;
mod charges;
pub mod fleet_sync;
mod host;
#[cfg(any(test, feature = "test-support"))]
pub mod mock;
mod stat_book;
mod sweep;
mod sync;
// Fleet bounds across several nodes, each over its own store, with a
// simulated service (test code only).
#[cfg(test)]
mod fleet_tests;
#[cfg(test)]
mod tests;
mod warm;
pub mod warm_up;

pub use active::{Active, ConfigureError};
pub use host::{NodeHost, NodeStat, NodeStats};
pub use stat_book::{StatBook, StatSink};

use crate::count::directory;
use crate::count::lane::Table;
use crate::node::fleet_sync::{Batch, Settled};
use crate::node::warm_up::WarmUp;
use crate::pipeline::owed::Owed;
use crate::pipeline::Level;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// The period of everything but the fleet sync.
pub(crate) const HOUSEKEEPING_MS: u64 = 1_000;
/// Ticks come a little early or late: a tick this close to the period
/// counts as a whole one.
const TICK_SLACK_MS: u64 = 50;

/// One root context: the configuration in force, and what it runs at its
/// ticks.
pub struct RootState<S> {
    active: Option<Rc<Active<S>>>,
    /// The configuration's bytes, to register it again if the directory
    /// forgot it while it was in force.
    bytes: Vec<u8>,
    /// It was in force at its last tick.
    current: bool,
    /// Joined its configuration's directory entry (at its first tick).
    joined: bool,
    /// This worker's connection to the rate-limit service.
    warm: WarmUp,
    /// This context's id in the fleet record's lease (random).
    me: u64,
    /// Fleet sync calls in flight, by token, with the configuration that
    /// made them (a reload may come before the answer).
    syncs: HashMap<u32, (Rc<Active<S>>, Batch)>,
    /// When the last 1 s housekeeping and the last fleet sync ran.
    housekept_ms: u64,
    synced_ms: u64,
    /// The fleet sync failed at its last call (logged once until it answers).
    sync_failing: bool,
    /// This node's id for the fleet heartbeat (read at the first sync).
    node: String,
    /// The size of the caller tables it creates.
    table: Table,
    /// Costs this worker's requests owe the rate-limit service, and the
    /// calls in flight that charge them (by token: how many).
    owed: Rc<RefCell<Owed>>,
    charging: HashMap<u32, usize>,
}

impl<S: NodeStats> RootState<S> {
    /// A root context with lease id `random` (made odd: never 0, no lease)
    /// whose caller tables have `table`'s size.
    pub fn new(random: u64, table: Table) -> RootState<S> {
        RootState {
            active: None,
            bytes: Vec::new(),
            current: false,
            joined: false,
            warm: WarmUp::default(),
            me: random | 1,
            syncs: HashMap::new(),
            housekept_ms: 0,
            synced_ms: 0,
            sync_failing: false,
            node: String::new(),
            table,
            owed: Rc::default(),
            charging: HashMap::new(),
        }
    }

    /// The configuration in force, for the requests that start now.
    pub fn active(&self) -> Option<Rc<Active<S>>> {
        self.active.clone()
    }

    /// The configuration a new request runs under: none before one is in
    /// force, nor once the directory forgot it (its lanes may be another
    /// bound's now: it counts nothing more).
    pub fn for_request(&self) -> Option<Rc<Active<S>>> {
        self.active.clone().filter(|a| !a.orphaned.get())
    }

    /// A configuration (`bytes`) arrived: put in force, or rejected with
    /// its errors logged (false: the host refuses it).
    pub fn configure<H: NodeHost<Stats = S>>(&mut self, host: &mut H, bytes: Vec<u8>) -> bool {
        let active = match active::activate(host, &bytes, self.table, Rc::clone(&self.owed)) {
            Ok(active) => active,
            Err(errors) => {
                for e in &errors {
                    let msg = format!("ratebound configuration rejected: {e}");
                    host.log(Level::Error, &msg);
                }
                return false;
            }
        };
        self.leave(host);
        self.bytes = bytes;
        self.current = true;
        let p = &active.limiter.plan;
        let msg = format!(
            "ratebound configured: instance {:?}, {} routes, {} bounds",
            p.instance,
            p.routes.len(),
            p.routes.iter().map(|r| r.bounds.len()).sum::<usize>()
        );
        host.log(Level::Info, &msg);
        // Fleet bounds sync every `sync_ms`; the rest runs each second.
        let tick_ms = match (&active.limiter.fleet, &p.service) {
            (Some(_), Some(s)) => s.sync_ms.min(HOUSEKEEPING_MS),
            _ => HOUSEKEEPING_MS,
        };
        self.active = Some(Rc::new(active));
        host.set_tick_period(tick_ms);
        true
    }

    /// A tick: the fleet sync when due, and each second the stats, the
    /// directory's heartbeat, the sweep and the warm-up.
    pub fn tick<H: NodeHost<Stats = S>>(&mut self, host: &mut H) {
        let Some(active) = self.active.clone() else {
            return;
        };
        let now = host.now_ms();
        if self.current && self.sync_due(&active, now) {
            self.sync_now(host, &active, now);
        }
        self.send_owed(host, &active);
        if now.saturating_sub(self.housekept_ms) < HOUSEKEEPING_MS - TICK_SLACK_MS {
            return;
        }
        self.housekept_ms = now;
        let stats = &active.stats;
        stats.count(NodeStat::FleetAlone(active.limiter.take_alone()));
        let (saved, stale) = active.limiter.take_memory_counts();
        stats.count(NodeStat::WriteMemory(saved, stale));
        stats.count(NodeStat::Flush);
        match directory::beat(host.store(), active.gen, !self.joined, now) {
            Ok(Some(beat)) => {
                self.joined = true;
                self.current = beat.current;
                // Only the configuration in force keeps gauges and sweeps:
                // a superseded one only serves connections that are
                // draining, and its lanes are not all its own.
                if beat.current {
                    sweep::sweep(host, &active, now);
                    self.warm_up(host, &active);
                }
            }
            Ok(None) => self.forgotten(host, &active),
            Err(e) => {
                active.stats.count(NodeStat::StoreError);
                host.log(Level::Warn, &format!("ratebound: lane directory: {e}"));
            }
        }
    }

    /// A call this context made was answered (or failed), with a body of
    /// `body` bytes.
    pub fn on_answer<H: NodeHost<Stats = S>>(
        &mut self,
        host: &mut H,
        token: u32,
        body: usize,
    ) -> Option<Settled> {
        let status = crate::pipeline::rls_status(host);
        let headers = host.answer_header(":status").is_some();
        self.answered(host, token, (status, headers), body)
    }

    /// A call this context made ended: `grpc_status` as the host read it
    /// (`headers`: the answer had any), a body of `body` bytes. A fleet
    /// sync's answer says what it was settled as.
    pub fn answered<H: NodeHost<Stats = S>>(
        &mut self,
        host: &mut H,
        token: u32,
        (grpc_status, headers): (u32, bool),
        body: usize,
    ) -> Option<Settled> {
        match self.syncs.remove(&token) {
            Some((active, batch)) => {
                let message = host
                    .answer_trailer("grpc-message")
                    .or_else(|| host.answer_header("grpc-message"))
                    .unwrap_or_default();
                let status =
                    crate::node::fleet_sync::failed_call_status(grpc_status, headers, &message);
                Some(self.synced(host, &active, &batch, status, body))
            }
            None => {
                if !self.charged(host, token, grpc_status) {
                    self.warm_up_answered(host, grpc_status);
                }
                None
            }
        }
    }

    /// The context is going away. Envoy destroys a superseded
    /// configuration's contexts once its connections drained: its lanes
    /// are free when the last one leaves.
    pub fn done<H: NodeHost<Stats = S>>(&mut self, host: &mut H) {
        self.leave(host);
    }

    /// Leaves the directory entry this context joined, if it did.
    fn leave<H: NodeHost<Stats = S>>(&mut self, host: &mut H) {
        let Some(active) = self.active.take() else {
            return;
        };
        if !std::mem::take(&mut self.joined) {
            return;
        }
        let gen = active.gen;
        match directory::leave(host.store(), gen) {
            Ok(left) => host.log(
                Level::Debug,
                &format!("ratebound: a context of generation {gen} left the lane directory ({left} left)"),
            ),
            Err(e) => host.log(
                Level::Warn,
                &format!("ratebound: leaving the lane directory: {e}"),
            ),
        }
    }

    /// The directory no longer knows this configuration: none of its
    /// contexts ticked for `directory::LEASE_MS`. In force, it registers again
    /// (its counts start over); superseded, it stops counting, since its
    /// lanes may be another bound's by now.
    fn forgotten<H: NodeHost<Stats = S>>(&mut self, host: &mut H, active: &Active<S>) {
        active.stats.count(NodeStat::StoreError);
        if !self.current {
            if !active.orphaned.replace(true) {
                host.log(
                    Level::Error,
                    "ratebound: a superseded configuration was forgotten by the lane directory \
                     (no tick for a minute); its draining connections are no longer counted",
                );
            }
            return;
        }
        host.log(
            Level::Error,
            "ratebound: the configuration in force was forgotten by the lane directory \
             (no tick for a minute); registering it again, its counts start over",
        );
        match active::activate(host, &self.bytes, self.table, Rc::clone(&self.owed)) {
            Ok(fresh) => {
                self.joined = false;
                self.active = Some(Rc::new(fresh));
            }
            Err(errors) => {
                for e in errors {
                    host.log(Level::Error, &format!("ratebound: registering again: {e}"));
                }
            }
        }
    }
}

//! Fleet bounds: one budget for every node, decided on each node from what
//! the rate-limit service last said plus what this node admitted since.
//! Pure arithmetic for one key, `now` passed in (no host calls); the calls
//! themselves are the wiring's.
//!
//! The service (envoyproxy/ratelimit) counts fixed windows aligned to the
//! clock: each sync INCRBYs the key of the window *the service's clock is
//! in* by `hits_addend` and answers with the count (limit − remaining). A
//! node decides with the two-window estimate of [`window`](super::window):
//!
//! ```text
//! estimate = prev × (1 − elapsed/window) + cur + local
//! ```
//!
//! `prev` and `cur` are the fleet counts of the previous and the current
//! window as last synced (the previous one's is what the last answer before
//! the boundary saw), `local` every hit this node admitted that no answer
//! has counted yet. Refused requests are never counted nor sent.
//!
//! **Hits across a boundary.** A hit admitted in window W but sent after
//! the boundary is counted by the service in W + 1. The rule here is the
//! service's: an unsent hit belongs to the window it *will* be counted in,
//! so at a boundary it stays in `local` (full weight in W + 1) and is not
//! folded into `prev`. Why:
//! - it keeps the node's view the same as every other node's will be once
//!   the hit is synced: there is no jump when the answer arrives, so a hit
//!   is never counted twice nor dropped between "unsent" and "synced";
//! - it can only err towards refusing: a hit moved from the previous window
//!   (weight 1 − elapsed/window) to the current one (weight 1) weighs more,
//!   never less.
//!
//! A carried hit (admitted in W − 1, sent in W) is sent weighted by what it
//! still weighs at the send: `ceil(carried × (1 − elapsed/window))`. The
//! service puts it in W at full weight until W ends, where its true weight
//! only falls from there: the weighted figure is still never below the
//! truth, and after an outage (a whole window carried) it does not charge
//! that window again to the current one. Usually `carried` is one sync
//! period of hits sent just after a boundary, weighted ≈ 1. Unsent hits
//! older than the previous window are dropped (`carried` is replaced at
//! each boundary): they no longer weigh on any trailing window.
//!
//! **An answer across a boundary** (sent in W, answered in W + 1): the
//! service counted the hits in W or in W + 1, and which is not known (its
//! `duration_until_reset` is whole seconds). Its count is taken as a floor
//! for `prev` and the sent hits stay at full weight (`unplaced`) until an
//! answer sent and received within W + 1 counts them or shows they are not
//! there. Both choices over-count, never under.
//!
//! **Between two answers** a node admits at most its share of what the
//! fleet had left at the last one: `(limit − synced estimate) / nodes` (at
//! least 1 while anything is left), whatever the estimate says. Every node
//! holds to its own share, so however the requests line up (a burst on
//! every node right after a sync) the nodes together admit about what was
//! left, not once each. Past its share a node refuses with a wait of a
//! sync: the next answer gives a new share.
//!
//! **No answer yet for the key** (the key is new to this node, or the node
//! restarted) while the service answers: a sync's worth of its share,
//! `limit × sync_ms / window / nodes` (at least 1), until the first answer
//! says what the fleet has left. **No fresh answer** otherwise (the service
//! is down): the node decides alone, at `limit / known nodes` of its own
//! admissions (at least 1), and still within what it last knew of the
//! fleet. The node count is the last one heard, however old.
//!
//! **A timed-out sync** may have been counted: its hits are not sent again
//! (`doubt`) and the next answer in the window counts them once whichever
//! it was (module [`FleetCounts::apply_answer`]).
//!
//! At most one sync per key is in flight ([`FleetCounts::take_unsynced`]
//! returns `None` until it is answered or failed): answers then arrive in
//! the order they were sent, and `cur` only ever grows within a window.

use crate::count::window::{Counts, Quota, Rate, Verdict};

/// A fleet bound: `rate` for the whole fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetRate {
    pub rate: Rate,
    /// Nodes last known to share the bound (0 is read as 1): the share a
    /// node takes alone.
    pub nodes: u32,
    /// An answer older than this no longer vouches for the fleet counts and
    /// the node decides alone. About two sync periods plus the call timeout.
    pub stale_ms: u64,
    /// How often the node syncs: a key new to this node may admit a sync's
    /// worth of its share before its first answer, and a refusal for the
    /// share says to retry after a sync.
    pub sync_ms: u64,
    /// The service is down (its calls fail, none answered lately): a key
    /// never answered takes the outage share, there is no answer to wait for.
    pub down: bool,
    /// `nodes` was counted by the service (not the configured guess): a
    /// fleet of one counted is one, a guess of one may be wrong.
    pub counted: bool,
    /// The per-answer share ([`Guard::Shares`]), or the estimate alone (the
    /// rule before issue 22: kept for the simulation's comparison).
    pub guard: Guard,
}

/// What bounds a node's admissions between two answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Guard {
    /// No more unsynced admissions than `(limit − fleet estimate at the
    /// last answer) / nodes` (at least 1), and a key new to the node a
    /// sync's worth of its share until its first answer.
    #[default]
    Shares,
    /// The fleet estimate only (and `limit / nodes` alone for a new key).
    Estimate,
}

/// What one node knows of one fleet key. Counts are hits; windows are
/// `now / window_ms` as in [`Counts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FleetCounts {
    /// The window the fields below are about.
    pub win: u64,
    /// The fleet count of `win − 1` as last synced.
    pub prev: u32,
    /// The fleet count of `win` as last synced.
    pub cur: u32,
    /// Admitted by this node in `win`, not yet taken by a sync.
    pub unsynced: u32,
    /// Admitted by this node in `win − 1`, not yet taken by a sync (the
    /// service will count them in `win`).
    pub carried: u32,
    /// Hits of a sync answered across a boundary: counted by the service in
    /// `win − 1` or `win`, not known which.
    pub unplaced: u32,
    /// The sync in flight, if any.
    pub pending: Option<Sent>,
    /// This node's own admissions in `win` and `win − 1`: the counts it
    /// decides alone with.
    pub own_cur: u32,
    pub own_prev: u32,
    /// When the last answer was applied (`None`: never).
    pub answered_ms: Option<u64>,
    /// The nodes known when the last answer was applied: the share of what
    /// the fleet had left that this node may admit before the next answer.
    pub nodes: u32,
    /// What the other nodes are taken to hold unsynced at the last answer:
    /// the larger of what they synced since this node's previous answer and
    /// (nodes − 1) × what this node sent with the last one. Counted against
    /// what the fleet has left for the share: without it, a node answered
    /// between the others' syncs takes a share of a budget they already
    /// hold (up to (nodes − 1) / (2 × nodes) of it over, in a flood).
    pub ahead: u32,
    /// Hits of syncs that timed out in `win`: the service may have counted
    /// them, so they are never sent again (no double count) and weigh here
    /// at full weight until the next answer, which settles them
    /// ([`FleetCounts::apply_answer`]), or the window rolls.
    pub doubt: u32,
}

/// One sync of one key: what the service is sent (`hits` as the
/// descriptor's `hits_addend`, 0 included: 0 reads without counting) and
/// the hits it was taken from, to put them back if the call fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// `hits_addend`: `from_cur` plus `from_prev` weighted (module doc).
    pub hits: u32,
    /// The window the sync was taken in.
    pub win: u64,
    /// Admitted in `win`.
    pub from_cur: u32,
    /// Admitted in `win − 1` (carried), before weighting.
    pub from_prev: u32,
    /// When it was taken: a sync whose call never ended (its context went
    /// away with a reload) is given up [`LOST_MS`] later.
    pub at_ms: u64,
}

/// A sync still in flight this long after it was taken is taken for lost
/// (its caller is gone: every call has a timeout of at most 10 s); it may
/// have reached the service, so its hits are kept as `doubt`, not re-sent.
pub const LOST_MS: u64 = 15_000;

/// What a fleet bound says about one more request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FleetVerdict {
    /// Admit; `state` is what to store.
    Admit {
        state: FleetCounts,
        quota: Quota,
        alone: bool,
    },
    /// Refuse; nothing changes.
    Refuse { quota: Quota, alone: bool },
}

impl FleetVerdict {
    pub fn admits(&self) -> bool {
        matches!(self, FleetVerdict::Admit { .. })
    }
}

/// An answer or a failure for a sync that is not the one in flight (a
/// duplicate, or one from before the state was lost): ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotPending;

/// Why a sync's call gave no count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// It never reached the service, or the service refused it whole.
    NotCounted,
    /// It may have been counted: it timed out or was cut after it was sent.
    MaybeCounted,
}

/// How an answer was placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// Sent and answered in the same window: the count is `cur`.
    Current,
    /// Answered in the next window: the count is a floor for `prev`.
    AcrossBoundary,
    /// Answered two or more windows later, or before it was sent (the clock
    /// stepped back): the count cannot be placed and is dropped.
    Dropped,
}

impl FleetCounts {
    /// The same knowledge seen from window `win`. One window ahead of
    /// `win` (a clock that stepped back a little) is kept as is, like
    /// [`Counts::at`]; further ahead or behind, the synced counts and the
    /// unsent hits no longer weigh and are dropped. The sync in flight and
    /// the time of the last answer are kept.
    pub fn at(self, win: u64) -> FleetCounts {
        if self.win == win || self.win == win.saturating_add(1) {
            self
        } else if self.win.saturating_add(1) == win {
            FleetCounts {
                win,
                // What the last sync before the boundary saw, plus the hits
                // that may have been counted in it.
                prev: self
                    .cur
                    .saturating_add(self.unplaced)
                    .saturating_add(self.doubt),
                cur: 0,
                unsynced: 0,
                // The service will count them in `win` (module doc).
                carried: self.unsynced,
                unplaced: 0,
                doubt: 0,
                own_prev: self.own_cur,
                own_cur: 0,
                ..self
            }
        } else {
            FleetCounts {
                win,
                pending: self.pending,
                answered_ms: self.answered_ms,
                nodes: self.nodes,
                ..FleetCounts::default()
            }
        }
    }

    /// This node's hits no answer has counted yet: full weight in the
    /// current window.
    pub fn local(&self) -> u32 {
        self.unsynced
            .saturating_add(self.carried)
            .saturating_add(self.unplaced)
            .saturating_add(self.doubt)
            .saturating_add(self.pending.map_or(0, |s| s.hits))
    }

    /// Hits this node admitted that its last answer did not count and that
    /// no answer or failure has settled yet: what the share bounds.
    pub fn since_answer(&self) -> u32 {
        self.unsynced
            .saturating_add(self.carried)
            .saturating_add(self.pending.map_or(0, |s| s.hits))
    }

    /// The fleet as this node sees it, as two-window counts.
    pub fn view(&self) -> Counts {
        Counts {
            win: self.win,
            cur: self.cur.saturating_add(self.local()),
            prev: self.prev,
        }
    }

    /// This node's own admissions, as two-window counts.
    pub fn own(&self) -> Counts {
        Counts {
            win: self.win,
            cur: self.own_cur,
            prev: self.own_prev,
        }
    }

    /// Whether the last answer still vouches for the fleet counts at `now`.
    pub fn fresh(&self, now_ms: u64, stale_ms: u64) -> bool {
        self.answered_ms
            .is_some_and(|t| now_ms.saturating_sub(t) <= stale_ms)
    }

    /// Records an admission of `hits` units (state already at now's
    /// window).
    fn admitted(self, hits: u32) -> FleetCounts {
        FleetCounts {
            unsynced: self.unsynced.saturating_add(hits),
            own_cur: self.own_cur.saturating_add(hits),
            ..self
        }
    }

    /// Adds `delta` units to what this node charged in window `win` (a
    /// cost known after its reservation, or −hits for a request taken
    /// back). More lands in the counts' latest window, to be synced: never
    /// lost. Less is given back only from what no sync has taken yet, in
    /// `win` itself: the service keeps what it was sent (an over-count,
    /// never under). Whether anything changed.
    pub fn charge(&mut self, win: u64, delta: i64) -> bool {
        let before = *self;
        if delta > 0 && self.win >= win {
            let d = u32::try_from(delta).unwrap_or(u32::MAX);
            self.unsynced = self.unsynced.saturating_add(d);
            self.own_cur = self.own_cur.saturating_add(d);
        } else if delta < 0 && self.win == win {
            let back = u32::try_from(delta.unsigned_abs())
                .unwrap_or(u32::MAX)
                .min(self.unsynced)
                .min(self.own_cur);
            self.unsynced -= back;
            self.own_cur -= back;
        }
        *self != before
    }

    /// Takes every unsent hit for a sync at `now`; `None` while a sync is
    /// in flight (one in flight for [`LOST_MS`] is failed first). A sync
    /// with 0 hits is still worth sending: it reads the fleet count.
    pub fn take_unsynced(&mut self, rate: Rate, now_ms: u64) -> Option<Sent> {
        if let Some(lost) = self
            .pending
            .filter(|p| now_ms.saturating_sub(p.at_ms) >= LOST_MS)
        {
            // Its call may have reached the service.
            let _ = self.sync_failed(rate, lost, now_ms, Failure::MaybeCounted);
        }
        *self = self.at(rate.window_of(now_ms));
        if self.pending.is_some() {
            return None;
        }
        let sync = Sent {
            hits: self
                .unsynced
                .saturating_add(still_weighs(rate, self.win, self.carried, now_ms)),
            win: self.win,
            from_cur: self.unsynced,
            from_prev: self.carried,
            at_ms: now_ms,
        };
        self.unsynced = 0;
        self.carried = 0;
        self.pending = Some(sync);
        Some(sync)
    }

    /// Applies the service's answer to `sync`: `fleet_count` is the count
    /// after its INCRBY (limit − remaining when the limit is sent as the
    /// override; a count above that limit reads as the limit); `nodes` the
    /// nodes known now, for the share until the next answer.
    pub fn apply_answer(
        &mut self,
        rate: Rate,
        sync: Sent,
        fleet_count: u32,
        answered_ms: u64,
        nodes: u32,
    ) -> Result<Placed, NotPending> {
        self.settle(rate, sync, answered_ms)?;
        self.nodes = nodes;
        let placed = if self.win == sync.win {
            // The service only adds within a window: the larger count is
            // the later one, and it includes anything unplaced. Hits in
            // doubt are settled too: the count is at least the last one
            // plus every hit this node sent since (counted or not, this
            // node knows it admitted them), and if the service did count
            // them they are in its count, not twice.
            let known = self
                .cur
                .saturating_add(self.doubt)
                .saturating_add(sync.hits);
            // (A first answer has no previous count to take a rate from.)
            let others = if self.answered_ms.is_some() {
                fleet_count.saturating_sub(known)
            } else {
                0
            };
            self.ahead = others.max(nodes.saturating_sub(1).saturating_mul(sync.hits));
            self.cur = self.cur.max(fleet_count).max(known);
            self.doubt = 0;
            self.unplaced = 0;
            Placed::Current
        } else if self.win == sync.win.saturating_add(1) {
            self.prev = self.prev.max(fleet_count);
            self.unplaced = self.unplaced.saturating_add(sync.hits);
            Placed::AcrossBoundary
        } else {
            return Ok(Placed::Dropped);
        };
        self.answered_ms = Some(answered_ms);
        Ok(placed)
    }

    /// The call for `sync` failed. `Failure::NotCounted` (the service was
    /// unreachable, or answered with an error): its hits are sent again with
    /// the next sync, those still young enough to weigh.
    /// `Failure::MaybeCounted` (a timeout, a reset after sending): the
    /// service may have counted them, so they are not sent again but weigh
    /// here at full weight (`doubt`) until the next answer in their window
    /// (its count is then at least the last one plus them: counted once
    /// either way) or until their window is the previous one, where they
    /// are folded into `prev`. Re-sending would count them twice at the
    /// service for every node; if the call was in fact lost, only the other
    /// nodes under-count them (docs/fleet.md, "Failed syncs").
    pub fn sync_failed(
        &mut self,
        rate: Rate,
        sync: Sent,
        now_ms: u64,
        failure: Failure,
    ) -> Result<(), NotPending> {
        self.settle(rate, sync, now_ms)?;
        if failure == Failure::MaybeCounted {
            if self.win == sync.win {
                self.doubt = self.doubt.saturating_add(sync.hits);
            } else if self.win == sync.win.saturating_add(1) {
                self.prev = self.prev.saturating_add(sync.hits);
            }
            return Ok(());
        }
        if self.win == sync.win {
            self.unsynced = self.unsynced.saturating_add(sync.from_cur);
            self.carried = self.carried.saturating_add(sync.from_prev);
        } else if self.win == sync.win.saturating_add(1) {
            self.carried = self.carried.saturating_add(sync.from_cur);
        }
        Ok(())
    }

    /// Checks `sync` is the one in flight, clears it and moves to now's
    /// window.
    fn settle(&mut self, rate: Rate, sync: Sent, now_ms: u64) -> Result<(), NotPending> {
        if self.pending != Some(sync) {
            return Err(NotPending);
        }
        self.pending = None;
        *self = self.at(rate.window_of(now_ms));
        Ok(())
    }

    /// True when nothing about the key weighs at window `win` and nothing
    /// is left to send: the key can be reclaimed.
    pub fn expired(&self, win: u64) -> bool {
        let s = self.at(win);
        s.view().cur == 0 && s.prev == 0 && s.own_prev == 0 && s.pending.is_none()
    }
}

impl FleetRate {
    /// What a node may admit alone in a window: `limit / nodes`, rounded
    /// down (the nodes together never exceed the limit), but at least 1 so a
    /// bound smaller than the fleet does not refuse everything.
    pub fn share(&self) -> u32 {
        (self.rate.limit / self.nodes.max(1)).max(1)
    }

    /// What a key new to this node may admit before its first answer: a
    /// tenth of its share, or a sync's worth of it if more (`limit ×
    /// sync_ms / window / nodes`), at least 1; the whole share on a fleet of
    /// one (no other node to have spent it). The first answer comes within
    /// a sync and a call; a node that restarted, or never saw the key,
    /// learns what the fleet has left before admitting more. A tenth: a new
    /// caller's first requests pass (a page's worth), and a key new to
    /// every other node costs the fleet at most a tenth of a share each.
    pub fn join_share(&self) -> u32 {
        let share = self.share();
        if self.nodes <= 1 && self.counted {
            return share;
        }
        let per_sync = u64::from(self.rate.limit).saturating_mul(self.sync_ms)
            / self.rate.window_ms.max(1)
            / u64::from(self.nodes.max(1));
        let per_sync = u32::try_from(per_sync).unwrap_or(u32::MAX);
        (share / 10).max(per_sync).clamp(1, share)
    }

    /// Decides one more request: with the fleet counts when an answer is
    /// fresh; for a key never answered while the service answers, the join
    /// share; alone otherwise.
    pub fn decide(&self, state: FleetCounts, now_ms: u64) -> FleetVerdict {
        self.decide_hits(state, now_ms, 1)
    }

    /// [`decide`](Self::decide) for a request of `hits` units (a cost
    /// bound's reservation, or a cost its request names).
    pub fn decide_hits(&self, state: FleetCounts, now_ms: u64, hits: u32) -> FleetVerdict {
        if state.fresh(now_ms, self.stale_ms) {
            self.decide_fleet(state, now_ms, hits)
        } else if state.answered_ms.is_none() && !self.down && self.guard == Guard::Shares {
            self.decide_join(state, now_ms, hits)
        } else {
            self.decide_alone(state, now_ms, hits)
        }
    }

    /// What this node may still admit before its next answer: its share of
    /// what the fleet had left by the last answer, `(limit − estimate of the
    /// synced counts − what the others are taken to hold) / nodes`, at
    /// least 1 while anything is left. Every node holds to its own, so
    /// however their admissions line up (a burst on every node right after
    /// a sync), together they admit about what was left, plus 1 a node for
    /// the rounding.
    pub fn allowance(&self, s: &FleetCounts, now_ms: u64) -> u32 {
        let synced = Counts {
            win: s.win,
            cur: s.cur.saturating_add(s.unplaced).saturating_add(s.doubt),
            prev: s.prev,
        };
        if self.rate.left(synced, now_ms) == 0 {
            return 0;
        }
        let held = Counts {
            cur: synced.cur.saturating_add(s.ahead),
            ..synced
        };
        (self.rate.left(held, now_ms) / s.nodes.max(1)).max(1)
    }

    /// The fleet estimate: last synced counts plus this node's unsynced
    /// hits, and (with [`Guard::Shares`] and more than one node) no more
    /// admissions between two answers than the [`allowance`](Self::allowance).
    /// A request of more units than the allowance passes the share when
    /// it is the node's first since the answer (else it never would).
    pub fn decide_fleet(&self, state: FleetCounts, now_ms: u64, hits: u32) -> FleetVerdict {
        let s = state.at(self.rate.window_of(now_ms));
        let over_share = |allowance: u32| {
            let held = s.since_answer();
            held >= allowance || (held > 0 && held.saturating_add(hits) > allowance)
        };
        match self.rate.decide_hits(s.view(), now_ms, hits) {
            Verdict::Admit { .. }
                if self.guard == Guard::Shares
                    && s.nodes > 1
                    && over_share(self.allowance(&s, now_ms)) =>
            {
                FleetVerdict::Refuse {
                    quota: self.wait_a_sync(),
                    alone: false,
                }
            }
            Verdict::Admit { quota, .. } => FleetVerdict::Admit {
                state: s.admitted(hits),
                quota,
                alone: false,
            },
            Verdict::Refuse { quota } => FleetVerdict::Refuse {
                quota,
                alone: false,
            },
        }
    }

    /// A refusal for the share: the next answer, about a sync away, gives
    /// a new one.
    fn wait_a_sync(&self) -> Quota {
        Quota {
            limit: self.rate.limit,
            remaining: 0,
            reset_ms: self.sync_ms.max(1),
        }
    }

    /// A key never answered, the service up: its own admissions against the
    /// [`join_share`](Self::join_share) until the first answer (a request
    /// of more units than the share takes all of it).
    pub fn decide_join(&self, state: FleetCounts, now_ms: u64, hits: u32) -> FleetVerdict {
        let s = state.at(self.rate.window_of(now_ms));
        let join = Rate {
            limit: self.join_share(),
            ..self.rate
        };
        match join.decide_hits(s.own(), now_ms, hits.min(join.limit)) {
            Verdict::Admit { quota, .. } => FleetVerdict::Admit {
                state: s.admitted(hits),
                quota,
                alone: true,
            },
            Verdict::Refuse { .. } => FleetVerdict::Refuse {
                quota: self.wait_a_sync(),
                alone: true,
            },
        }
    }

    /// Without the service: this node's own admissions against its
    /// [`share`](Self::share), and still within what it last knew of the
    /// fleet (a stale view only errs towards refusing: it keeps every hit
    /// this node admitted since). The quota is the tighter of the two. A
    /// request of more units than the share takes all of it.
    pub fn decide_alone(&self, state: FleetCounts, now_ms: u64, hits: u32) -> FleetVerdict {
        let s = state.at(self.rate.window_of(now_ms));
        let share = Rate {
            limit: self.share(),
            ..self.rate
        };
        let fleet = self.rate.decide_hits(s.view(), now_ms, hits);
        let own = share.decide_hits(s.own(), now_ms, hits.min(share.limit));
        match (fleet, own) {
            (Verdict::Admit { quota: a, .. }, Verdict::Admit { quota: b, .. }) => {
                FleetVerdict::Admit {
                    state: s.admitted(hits),
                    quota: tighter(a, b),
                    alone: true,
                }
            }
            (Verdict::Refuse { quota }, Verdict::Admit { .. })
            | (Verdict::Admit { .. }, Verdict::Refuse { quota }) => {
                FleetVerdict::Refuse { quota, alone: true }
            }
            (Verdict::Refuse { quota: a }, Verdict::Refuse { quota: b }) => FleetVerdict::Refuse {
                quota: if a.reset_ms >= b.reset_ms { a } else { b },
                alone: true,
            },
        }
    }
}

/// A node's fleet record in shared data, one per configuration instance:
/// which root context syncs (a lease every context may claim when it
/// runs out: one syncing thread per node, not per worker), how many
/// nodes the service last counted, and whether it answers.
///
/// Nodes are counted with a heartbeat key in the service: each node adds 1
/// to it once per clock minute, and reads it with every sync. Early in a
/// minute few nodes have added theirs, so the count is the larger of this
/// minute's and the last one seen of the minute before; a node gone is
/// still counted for up to two minutes (its peers then take a smaller
/// share alone, never a larger one). The count never falls back to the
/// configured guess because it is old: a long outage keeps the last one.
///
/// A node adds its 1 together with 1 to its own key (its stable node id),
/// in one call, after reading that own key at 0 this minute: a restarted
/// node (its shared data gone) finds its 1 already added and is not counted
/// twice, and an add that timed out is read back before it is tried again
/// (neither counted twice nor missed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Record {
    /// The syncing context's id, its configuration's generation (a newer
    /// configuration takes the lease at once: the superseded one only
    /// serves connections that drain), and when its lease ends.
    pub owner: u64,
    pub gen: u64,
    pub until_ms: u64,
    /// The heartbeat's clock minute and its counts: this minute's as last
    /// read, and the minute before's.
    pub minute: u64,
    pub cur: u32,
    pub prev: u32,
    /// The minute this node last added its 1 (0: never).
    pub beat: u64,
    /// The minute this node's own key was last read at 0 (0: never): from
    /// then on in that minute its 1 is still to add.
    pub asked: u64,
    /// When a sync call was last answered, and when calls started failing
    /// since (0: never).
    pub answered_ms: u64,
    pub failed_ms: u64,
}

/// The heartbeat's window: the service's minute.
pub const BEAT_MS: u64 = 60_000;

/// What the heartbeat does at one sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Beat {
    /// Add this node's 1 to the count, and 1 to its own key beside it.
    pub add: bool,
    /// Read this node's own key (0 added): above 0, this run or an earlier
    /// one of the same node has added its 1 this minute.
    pub ask: bool,
}

impl Beat {
    /// The call carries the node's own key (to read, or to add to).
    pub fn own_key(self) -> bool {
        self.ask || self.add
    }
}

impl Record {
    const BYTES: usize = 8 * 8 + 4 * 2;

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(Self::BYTES);
        for n in [
            self.owner,
            self.until_ms,
            self.minute,
            self.beat,
            self.gen,
            self.asked,
            self.answered_ms,
            self.failed_ms,
        ] {
            v.extend_from_slice(&n.to_le_bytes());
        }
        v.extend_from_slice(&self.cur.to_le_bytes());
        v.extend_from_slice(&self.prev.to_le_bytes());
        v
    }

    pub fn decode(b: &[u8]) -> Option<Record> {
        if b.len() != Self::BYTES {
            return None;
        }
        let u64_at = |i: usize| {
            b.get(i..i + 8)
                .and_then(|s| s.try_into().ok())
                .map(u64::from_le_bytes)
        };
        let u32_at = |i: usize| {
            b.get(i..i + 4)
                .and_then(|s| s.try_into().ok())
                .map(u32::from_le_bytes)
        };
        Some(Record {
            owner: u64_at(0)?,
            until_ms: u64_at(8)?,
            minute: u64_at(16)?,
            beat: u64_at(24)?,
            gen: u64_at(32)?,
            asked: u64_at(40)?,
            answered_ms: u64_at(48)?,
            failed_ms: u64_at(56)?,
            cur: u32_at(64)?,
            prev: u32_at(68)?,
        })
    }

    /// `me`, of configuration generation `gen`, holds the lease at `now`
    /// or may take it (it ran out, or `gen` is newer than the holder's);
    /// the record with the lease renewed for `lease_ms`, or `None` when
    /// another holds it.
    pub fn claim(self, me: u64, gen: u64, now_ms: u64, lease_ms: u64) -> Option<Record> {
        let mine = self.owner == me && self.gen == gen;
        (mine || self.until_ms <= now_ms || gen > self.gen).then_some(Record {
            owner: me,
            gen,
            until_ms: now_ms.saturating_add(lease_ms),
            ..self
        })
    }

    /// Whether this node's 1 for the minute of `now` is still to be added.
    pub fn beat_due(&self, now_ms: u64) -> bool {
        self.beat != now_ms / BEAT_MS
    }

    /// The heartbeat of a sync at `now`: first read the node's own key,
    /// then (if it said 0) add the 1 to the count and to the own key.
    pub fn beat(&self, now_ms: u64) -> Beat {
        let minute = now_ms / BEAT_MS;
        let due = self.beat != minute;
        Beat {
            add: due && self.asked == minute,
            ask: due && self.asked != minute,
        }
    }

    /// This node's own key was read as `own` (its count this minute) by a
    /// call sent at `sent_ms`: above 0, its 1 is added already.
    pub fn asked(self, sent_ms: u64, own: u32) -> Record {
        let minute = sent_ms / BEAT_MS;
        let mut r = self;
        if own > 0 {
            r.beat = minute;
        } else {
            r.asked = minute;
        }
        r
    }

    /// A heartbeat call sent at `sent_ms` timed out: an add in it may have
    /// landed, so the own key is read again before any other add (the two
    /// 1s go in the same call, so the own key says whether the count's did).
    pub fn maybe_beat(self, sent_ms: u64, beat: Beat) -> Record {
        let mut r = self;
        if beat.add && r.asked == sent_ms / BEAT_MS {
            r.asked = 0;
        }
        r
    }

    /// The heartbeat was answered: `count` nodes have added theirs in the
    /// minute `sent_ms` was in (`added`: this node's was among them).
    pub fn heard(self, sent_ms: u64, count: u32, added: bool) -> Record {
        let minute = sent_ms / BEAT_MS;
        let mut r = self;
        if minute == r.minute.saturating_add(1) {
            r.prev = r.cur;
            r.cur = 0;
        } else if minute != r.minute {
            if minute < r.minute {
                return r;
            }
            // After a gap (an outage), the last count stands in for the
            // minute before until this one has heard every node.
            r.prev = r.cur.max(r.prev);
            r.cur = 0;
        }
        r.minute = minute;
        r.cur = r.cur.max(count);
        if added {
            r.beat = minute;
        }
        r
    }

    /// The nodes last counted (`None`: never heard). Early in a minute, the
    /// larger of this minute's count and the last one's; once the count is
    /// old (the service silent), the last known one, never the configured
    /// guess.
    pub fn nodes(&self, now_ms: u64) -> Option<u32> {
        let minute = now_ms / BEAT_MS;
        let n = if minute == self.minute.saturating_add(1) && self.cur > 0 {
            self.cur
        } else {
            self.cur.max(self.prev)
        };
        (n > 0).then_some(n)
    }

    /// A sync call was answered, or failed, at `now`.
    pub fn answered(self, now_ms: u64) -> Record {
        Record {
            answered_ms: now_ms,
            ..self
        }
    }

    pub fn failed(self, now_ms: u64) -> Record {
        Record {
            failed_ms: if self.failed_ms > self.answered_ms {
                self.failed_ms
            } else {
                now_ms.max(1)
            },
            ..self
        }
    }

    /// The service is down at `now`: calls have failed, none answered, for
    /// `stale_ms` (a node's first call failing as it connects is not an
    /// outage: its keys still wait for their first answer).
    pub fn down(&self, now_ms: u64, stale_ms: u64) -> bool {
        self.failed_ms > self.answered_ms && now_ms.saturating_sub(self.failed_ms) > stale_ms
    }
}

/// `ceil(hits × (1 − elapsed/window))` for hits of window `win − 1` at
/// `now` (all of them when `now` is not past the start of `win`).
fn still_weighs(rate: Rate, win: u64, hits: u32, now_ms: u64) -> u32 {
    let w = u128::from(rate.window_ms.max(1));
    let start = win.saturating_mul(rate.window_ms);
    let elapsed = u128::from(now_ms.saturating_sub(start)).min(w);
    let weighted = (u128::from(hits) * (w - elapsed)).div_ceil(w);
    u32::try_from(weighted).unwrap_or(hits)
}

/// The quota that says less: fewer remaining, then the longer reset.
fn tighter(a: Quota, b: Quota) -> Quota {
    if (a.remaining, u64::MAX - a.reset_ms) <= (b.remaining, u64::MAX - b.reset_ms) {
        a
    } else {
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: u64 = 1_000;

    fn bound(limit: u32, nodes: u32) -> FleetRate {
        FleetRate {
            rate: Rate {
                limit,
                window_ms: W,
            },
            nodes,
            stale_ms: 1_000,
            sync_ms: 100,
            down: false,
            counted: true,
            guard: Guard::Shares,
        }
    }

    /// Admits while it can at `now`, returns how many.
    fn admit(b: &FleetRate, s: &mut FleetCounts, now: u64, n: u32) -> u32 {
        let mut k = 0;
        for _ in 0..n {
            if let FleetVerdict::Admit { state, .. } = b.decide(*s, now) {
                *s = state;
                k += 1;
            }
        }
        k
    }

    /// A state that has been answered (fresh) at `now` with `count`.
    fn synced(b: &FleetRate, s: &mut FleetCounts, now: u64, count: u32) -> Sent {
        let sync = s.take_unsynced(b.rate, now).unwrap();
        assert_eq!(
            s.apply_answer(b.rate, sync, count, now, 1),
            Ok(Placed::Current)
        );
        sync
    }

    #[test]
    fn the_fleet_count_weighs_with_this_nodes_unsynced_hits() {
        let b = bound(10, 4);
        let mut s = FleetCounts::default();
        synced(&b, &mut s, 10_000, 6);
        // 6 elsewhere: 4 more here.
        assert_eq!(admit(&b, &mut s, 10_100, 10), 4);
        assert_eq!(s.local(), 4);
        // The sync sends them; the answer counts them (and 1 more elsewhere).
        let sync = s.take_unsynced(b.rate, 10_200).unwrap();
        assert_eq!(sync.hits, 4);
        assert_eq!(s.local(), 4, "in flight still weighs");
        s.apply_answer(b.rate, sync, 11, 10_205, 1).unwrap();
        assert_eq!((s.cur, s.local()), (11, 0));
        assert!(!b.decide(s, 10_300).admits());
    }

    /// A cost bound: admitted while its units fit, trued up before its
    /// sync (the sync then sends the true cost as `hits_addend`), and never
    /// given back once a sync took it.
    #[test]
    fn a_cost_takes_its_units_and_its_true_up_is_what_the_sync_sends() {
        let b = bound(1_000, 1);
        let mut s = FleetCounts::default();
        synced(&b, &mut s, 10_000, 0);
        for _ in 0..3 {
            let FleetVerdict::Admit { state, .. } = b.decide_hits(s, 10_001, 300) else {
                panic!("300 of 1,000 fits");
            };
            s = state;
        }
        assert!(!b.decide_hits(s, 10_001, 300).admits(), "900 + 300 > 1,000");
        // The first answer cost 100: 200 back, and 300 fits again.
        assert!(s.charge(10, -200));
        assert_eq!((s.unsynced, s.own_cur), (700, 700));
        assert!(b.decide_hits(s, 10_001, 300).admits());
        // Another cost 800: 500 more, sent with the next sync.
        assert!(s.charge(10, 500));
        let sync = s.take_unsynced(b.rate, 10_002).unwrap();
        assert_eq!(sync.hits, 1_200);
        assert!(!s.charge(10, -100), "what a sync took stays charged");
        assert_eq!(s.local(), 1_200);
    }

    /// What the other nodes synced between two answers is taken as held
    /// by them: it counts against the share of what the fleet has left.
    #[test]
    fn what_the_others_synced_since_the_last_answer_counts_against_the_share() {
        let b = bound(20, 2);
        // 2 sent, the fleet at 10: the others synced 8 since.
        let mut s = two_hits_answered(&b, 2, 10);
        // 10 left, 8 of it taken as the others': a share of 1, not of 5.
        assert_eq!(admit(&b, &mut s, 10_150, 10), 1);
    }

    /// Answered at 0, then 2 hits admitted and sent, answered at `count`;
    /// both answers of `nodes` nodes.
    fn two_hits_answered(b: &FleetRate, nodes: u32, count: u32) -> FleetCounts {
        let mut s = FleetCounts::default();
        let sync = s.take_unsynced(b.rate, 10_000).unwrap();
        s.apply_answer(b.rate, sync, 0, 10_000, nodes).unwrap();
        assert_eq!(admit(b, &mut s, 10_050, 2), 2);
        let sync = s.take_unsynced(b.rate, 10_100).unwrap();
        s.apply_answer(b.rate, sync, count, 10_100, nodes).unwrap();
        s
    }

    /// A fleet of one holds to the estimate alone: what it finds counted
    /// beside its own hits takes no share.
    #[test]
    fn a_fleet_of_one_admits_what_the_estimate_leaves() {
        let b = bound(10, 1);
        let mut s = two_hits_answered(&b, 1, 6);
        assert_eq!(admit(&b, &mut s, 10_150, 10), 4);
    }

    /// Alone, refused both by what it knew of the fleet and by its own
    /// share: the wait is the longer of the two, so a retry when told is
    /// admitted (at the shorter one, its share still refuses).
    #[test]
    fn refused_alone_twice_over_the_wait_is_the_longer() {
        let b = bound(10, 2);
        let s = answered_long_ago(10, 5);
        let FleetVerdict::Refuse { quota, alone: true } = b.decide(s, 10_500) else {
            panic!("the fleet and the share are both full");
        };
        assert_eq!(quota.reset_ms, 700, "the share's wait; the fleet's is 600");
        assert!(b.decide(s, 10_500 + quota.reset_ms).admits());
    }

    /// Window 10 with the fleet at `cur` of which `own` this node's, as
    /// answered at 0 among 2 nodes: stale from 1 s on (the node is alone).
    fn answered_long_ago(cur: u32, own: u32) -> FleetCounts {
        FleetCounts {
            win: 10,
            cur,
            own_cur: own,
            answered_ms: Some(0),
            nodes: 2,
            ..FleetCounts::default()
        }
    }

    /// Alone and admitted, the quota shown is the tighter of the fleet's
    /// (as last known) and the node's own share.
    #[test]
    fn admitted_alone_the_quota_is_the_tighter_of_fleet_and_share() {
        let b = bound(10, 2);
        let s = answered_long_ago(2, 1);
        let FleetVerdict::Admit {
            quota, alone: true, ..
        } = b.decide(s, 10_500)
        else {
            panic!("room in both");
        };
        assert_eq!(
            quota.remaining, 3,
            "5 a node, 2 of them taken; 7 in the fleet"
        );
    }

    /// Early in a minute whose count is not heard yet, the nodes are the
    /// last minute's count, even when that minute was heard only at its
    /// start (no node had added yet: 0), from the minute before it.
    #[test]
    fn a_minute_heard_at_0_leaves_the_count_before_it() {
        let m = 10 * BEAT_MS;
        let r = Record::default()
            .heard(m - 1_000, 3, true)
            .heard(m + 10, 0, false);
        assert_eq!(r.nodes(m + 20), Some(3));
        assert_eq!(r.nodes(m + BEAT_MS + 20), Some(3), "the next minute");
    }

    /// A refund for an earlier window gives nothing back from this one:
    /// the units it refunds were sent, or weigh in `carried` at their own
    /// weight (an over-count, never under).
    #[test]
    fn a_refund_for_an_earlier_window_takes_nothing_from_this_one() {
        let b = bound(100, 1);
        let mut s = FleetCounts::default();
        synced(&b, &mut s, 10_000, 0);
        admit(&b, &mut s, 10_500, 3);
        s = s.at(11);
        admit(&b, &mut s, 11_100, 4);
        assert!(!s.charge(10, -2));
        assert_eq!((s.unsynced, s.carried, s.own_cur), (4, 3, 4));
    }

    /// A sync that timed out and failed after the boundary may have been
    /// counted in the window now previous: its hits weigh there. Failed two
    /// windows later, they weigh nowhere.
    #[test]
    fn a_timed_out_sync_failed_after_the_boundary_weighs_in_the_previous_window() {
        let b = bound(100, 1);
        for (failed_ms, prev) in [(11_050, 15), (12_050, 0)] {
            let mut s = FleetCounts::default();
            synced(&b, &mut s, 10_000, 10);
            admit(&b, &mut s, 10_010, 5);
            let sync = s.take_unsynced(b.rate, 10_900).unwrap();
            s.sync_failed(b.rate, sync, failed_ms, Failure::MaybeCounted)
                .unwrap();
            assert_eq!((s.prev, s.local()), (prev, 0), "failed at {failed_ms}");
        }
    }

    /// Between two answers a node holds to its allowance; a request larger
    /// than the allowance still passes as the node's first since the
    /// answer (else it never would), and nothing passes after it.
    #[test]
    fn a_cost_larger_than_the_share_passes_alone_and_fills_it() {
        let b = bound(1_000, 2);
        let mut s = FleetCounts::default();
        let sync = s.take_unsynced(b.rate, 10_000).unwrap();
        s.apply_answer(b.rate, sync, 0, 10_000, 2).unwrap();
        assert_eq!(b.allowance(&s, 10_001), 500);
        let FleetVerdict::Admit { state, .. } = b.decide_hits(s, 10_001, 600) else {
            panic!("the node's first request since the answer");
        };
        assert!(!b.decide_hits(state, 10_001, 1).admits());
        // Two of 300: the second would hold 600 of an allowance of 500.
        let FleetVerdict::Admit { state, .. } = b.decide_hits(s, 10_001, 300) else {
            panic!("300 of 500");
        };
        assert!(!b.decide_hits(state, 10_001, 300).admits());
        assert!(b.decide_hits(state, 10_001, 200).admits());
    }

    #[test]
    fn refused_requests_are_never_sent() {
        let b = bound(3, 1);
        let mut s = FleetCounts::default();
        synced(&b, &mut s, 10_000, 0);
        assert_eq!(admit(&b, &mut s, 10_001, 50), 3);
        assert_eq!(s.take_unsynced(b.rate, 10_002).unwrap().hits, 3);
    }

    /// Hits admitted before a boundary and sent after it: the service counts
    /// them in the new window, and so does the node meanwhile, at full
    /// weight; `prev` is what the last answer before the boundary saw.
    #[test]
    fn unsent_hits_cross_the_boundary_at_full_weight() {
        let b = bound(10, 2);
        let mut s = FleetCounts::default();
        synced(&b, &mut s, 10_500, 5);
        assert_eq!(admit(&b, &mut s, 10_900, 3), 3);
        let s11 = s.at(11);
        assert_eq!((s11.prev, s11.cur, s11.carried, s11.unsynced), (5, 0, 3, 0));
        // At 11_500: 5 × ½ + 3 = 5.5 → 4 more fit.
        let mut t = s11;
        assert_eq!(admit(&b, &mut t, 11_500, 10), 4);
        // The next sync sends the 4 and the 3 carried as what they still
        // weigh, ceil(3 × 0.4) = 2; the split is kept for a failure.
        let sync = t.take_unsynced(b.rate, 11_600).unwrap();
        assert_eq!(
            (sync.hits, sync.from_cur, sync.from_prev, sync.win),
            (6, 4, 3, 11)
        );
        t.apply_answer(b.rate, sync, 6, 11_602, 1).unwrap();
        assert_eq!((t.prev, t.cur, t.local()), (5, 6, 0));
        // Sent right at the boundary, they weigh in full.
        let mut u = s11;
        assert_eq!(u.take_unsynced(b.rate, 11_000).unwrap().hits, 3);
    }

    #[test]
    fn an_answer_across_a_boundary_floors_prev_and_keeps_the_hits_until_placed() {
        let b = bound(10, 2);
        let mut s = FleetCounts::default();
        synced(&b, &mut s, 10_100, 2);
        admit(&b, &mut s, 10_990, 3);
        let sync = s.take_unsynced(b.rate, 10_998).unwrap();
        assert_eq!(
            s.apply_answer(b.rate, sync, 8, 11_003, 1),
            Ok(Placed::AcrossBoundary)
        );
        assert_eq!((s.win, s.prev, s.cur, s.unplaced), (11, 8, 0, 3));
        // The next answer within window 11 says where they went.
        let next = s.take_unsynced(b.rate, 11_400).unwrap();
        assert_eq!(next.hits, 0);
        s.apply_answer(b.rate, next, 4, 11_402, 1).unwrap();
        assert_eq!((s.prev, s.cur, s.unplaced), (8, 4, 0));
    }

    /// Hits unplaced or in doubt at a boundary become the previous
    /// window's count, and weigh nowhere else: counted once.
    #[test]
    fn unplaced_hits_fold_into_prev_if_no_answer_places_them() {
        let s = FleetCounts {
            win: 11,
            prev: 8,
            cur: 1,
            unplaced: 3,
            doubt: 2,
            ..FleetCounts::default()
        };
        let next = s.at(12);
        assert_eq!(next.prev, 6);
        assert_eq!((next.view().cur, next.local()), (0, 0));
    }

    /// A key idle for whole windows, its last answer still fresh, is not a
    /// key new to the node: it decides with the fleet (not alone) and holds
    /// to its share of what was left among the nodes that answer counted.
    #[test]
    fn a_key_idle_for_windows_keeps_its_last_answer_and_its_share() {
        let b = FleetRate {
            stale_ms: 5_000,
            ..bound(8, 4)
        };
        let mut s = FleetCounts::default();
        let sync = s.take_unsynced(b.rate, 10_100).unwrap();
        s.apply_answer(b.rate, sync, 0, 10_100, 4).unwrap();
        // Three windows later: 8 left, a quarter of it for this node.
        let mut verdicts = vec![];
        for _ in 0..3 {
            let v = b.decide(s, 13_050);
            if let FleetVerdict::Admit { state, .. } = v {
                s = state;
            }
            verdicts.push(v);
        }
        assert!(verdicts[..2]
            .iter()
            .all(|v| matches!(v, FleetVerdict::Admit { alone: false, .. })));
        assert!(
            matches!(verdicts[2], FleetVerdict::Refuse { quota, alone: false } if quota.reset_ms == 100),
            "{:?}",
            verdicts[2]
        );
    }

    #[test]
    fn one_sync_at_a_time_and_stale_answers_are_refused() {
        let b = bound(10, 2);
        let mut s = FleetCounts::default();
        let sync = s.take_unsynced(b.rate, 10_000).unwrap();
        assert_eq!(s.take_unsynced(b.rate, 10_100), None);
        // A sync whose call never ends is given up, and the key syncs again.
        let mut lost = s;
        let again = lost.take_unsynced(b.rate, 10_000 + LOST_MS).unwrap();
        assert_eq!(again.at_ms, 10_000 + LOST_MS);
        let mut lost = FleetCounts::default();
        assert_eq!(
            lost.apply_answer(b.rate, sync, 3, 10_010, 1),
            Err(NotPending)
        );
        assert_eq!(
            lost.sync_failed(b.rate, sync, 10_010, Failure::NotCounted),
            Err(NotPending)
        );
        assert!(s.apply_answer(b.rate, sync, 3, 10_010, 1).is_ok());
        assert_eq!(s.apply_answer(b.rate, sync, 3, 10_010, 1), Err(NotPending));
    }

    #[test]
    fn a_failed_sync_is_sent_again_while_its_hits_still_weigh() {
        let b = bound(10, 2);
        let mut s = FleetCounts::default();
        synced(&b, &mut s, 10_000, 0);
        admit(&b, &mut s, 10_100, 2);
        let sync = s.take_unsynced(b.rate, 10_200).unwrap();
        s.sync_failed(b.rate, sync, 10_300, Failure::NotCounted)
            .unwrap();
        assert_eq!(s.unsynced, 2);
        // Failed again, after the boundary: they become carried …
        let sync = s.take_unsynced(b.rate, 10_900).unwrap();
        s.sync_failed(b.rate, sync, 11_000, Failure::NotCounted)
            .unwrap();
        assert_eq!((s.unsynced, s.carried), (0, 2));
        // … and after one more boundary they no longer weigh anywhere.
        let sync = s.take_unsynced(b.rate, 11_900).unwrap();
        s.sync_failed(b.rate, sync, 12_000, Failure::NotCounted)
            .unwrap();
        assert_eq!(s.local(), 0);
    }

    #[test]
    fn without_a_fresh_answer_a_node_takes_its_share() {
        let b = FleetRate {
            down: true,
            ..bound(10, 4)
        };
        let mut s = FleetCounts::default();
        // New key or restarted node: alone until the first answer.
        let FleetVerdict::Admit { alone, .. } = b.decide(s, 10_000) else {
            panic!()
        };
        assert!(alone);
        assert_eq!(admit(&b, &mut s, 10_000, 10), 2);
        // Answered: the fleet estimate decides again.
        synced(&b, &mut s, 10_001, 2);
        assert_eq!(admit(&b, &mut s, 10_002, 10), 8);
        // The service goes silent: stale 1 s after the last answer. Alone,
        // the node counts its own admissions against its share of 2.
        assert!(s.fresh(11_001, b.stale_ms));
        assert!(!s.fresh(11_002, b.stale_ms));
        assert_eq!(admit(&b, &mut s, 11_500, 10), 0, "own: ½ × 10 last window");
        assert_eq!(admit(&b, &mut s, 12_000, 10), 2);
        assert_eq!(admit(&b, &mut s, 12_999, 10), 0);
        assert_eq!(admit(&b, &mut s, 13_500, 10), 1, "½ × 2 last window");
    }

    /// Issue 22's synchronised burst: every node answered at a count of 3,
    /// then 400 requests on each at once. Each admits (300 − 3) / 3.
    #[test]
    fn each_node_admits_its_share_of_what_was_left_until_its_next_answer() {
        let b = FleetRate {
            rate: Rate {
                limit: 300,
                window_ms: 60_000,
            },
            ..bound(300, 3)
        };
        let now = 600_100;
        let mut total = 0;
        for _ in 0..3 {
            let mut s = FleetCounts::default();
            let sync = s.take_unsynced(b.rate, now).unwrap();
            s.apply_answer(b.rate, sync, 3, now, 3).unwrap();
            total += admit(&b, &mut s, now + 1, 400);
            // The refusal for the share: retry after a sync.
            let FleetVerdict::Refuse { quota, .. } = b.decide(s, now + 2) else {
                panic!()
            };
            assert_eq!(quota.reset_ms, b.sync_ms);
        }
        assert_eq!(total, 3 * 99);
        // The estimate alone (the rule before) let each take all 297.
        let before = FleetRate {
            guard: Guard::Estimate,
            ..b
        };
        let mut s = FleetCounts::default();
        let sync = s.take_unsynced(b.rate, now).unwrap();
        s.apply_answer(b.rate, sync, 3, now, 3).unwrap();
        assert_eq!(admit(&before, &mut s, now + 1, 400), 297);
    }

    #[test]
    fn a_key_never_answered_takes_a_syncs_worth_of_its_share_while_the_service_answers() {
        let minute = |nodes| FleetRate {
            rate: Rate {
                limit: 300,
                window_ms: 60_000,
            },
            sync_ms: 200,
            ..bound(300, nodes)
        };
        assert_eq!(minute(3).join_share(), 10, "a tenth of 300 / 3");
        assert_eq!(minute(1).join_share(), 300, "a fleet of one");
        let second = FleetRate {
            rate: Rate {
                limit: 100,
                window_ms: 1_000,
            },
            sync_ms: 200,
            ..bound(100, 3)
        };
        assert_eq!(second.join_share(), 6, "100 × 200 ms / 1 s / 3");
        let mut s = FleetCounts::default();
        assert_eq!(admit(&minute(3), &mut s, 600_000, 50), 10);
        // The service down: nothing to wait for, the outage share.
        let down = FleetRate {
            down: true,
            ..minute(3)
        };
        let mut s = FleetCounts::default();
        assert_eq!(admit(&down, &mut s, 600_000, 500), 100);
    }

    /// A timed-out sync may have been counted: not sent again, weighed here
    /// until the next answer, which counts it once whichever it was.
    #[test]
    fn hits_of_a_timed_out_sync_are_counted_once_either_way() {
        let b = bound(100, 1);
        for counted in [true, false] {
            let mut s = FleetCounts::default();
            synced(&b, &mut s, 10_000, 10);
            admit(&b, &mut s, 10_010, 5);
            let sync = s.take_unsynced(b.rate, 10_020).unwrap();
            s.sync_failed(b.rate, sync, 10_120, Failure::MaybeCounted)
                .unwrap();
            assert_eq!((s.doubt, s.unsynced, s.local()), (5, 0, 5));
            admit(&b, &mut s, 10_130, 2);
            let next = s.take_unsynced(b.rate, 10_200).unwrap();
            assert_eq!(next.hits, 2, "the 5 are not sent again");
            // 3 more elsewhere; the 5 in the count or not.
            let count = 10 + 3 + 2 + if counted { 5 } else { 0 };
            s.apply_answer(b.rate, next, count, 10_210, 1).unwrap();
            assert_eq!((s.doubt, s.local()), (0, 0));
            assert_eq!(s.cur, if counted { 20 } else { 17 });
        }
    }

    #[test]
    fn the_share_rounds_down_but_is_never_zero() {
        assert_eq!(bound(10, 4).share(), 2);
        assert_eq!(bound(10, 0).share(), 10);
        assert_eq!(bound(3, 8).share(), 1);
    }

    #[test]
    fn a_clock_stepping_back_by_more_than_a_window_starts_empty_but_keeps_the_call() {
        let b = bound(10, 2);
        let mut s = FleetCounts::default();
        synced(&b, &mut s, 50_000, 9);
        admit(&b, &mut s, 50_001, 1);
        let sync = s.take_unsynced(b.rate, 50_002).unwrap();
        let back = s.at(20);
        assert_eq!((back.win, back.view().cur, back.prev), (20, 1, 0));
        assert_eq!(back.pending, Some(sync));
        assert!(!back.expired(20), "a call in flight keeps the key");
        let mut t = back;
        assert_eq!(
            t.apply_answer(b.rate, sync, 10, 20_010, 1),
            Ok(Placed::Dropped)
        );
        assert!(t.expired(20));
    }

    #[test]
    fn one_context_holds_the_lease_until_it_runs_out() {
        let r = Record::default().claim(1, 5, 1_000, 3_000).unwrap();
        assert_eq!(r.claim(2, 5, 3_999, 3_000), None);
        assert_eq!(r.claim(1, 5, 3_999, 3_000).unwrap().until_ms, 6_999);
        assert_eq!(r.claim(2, 5, 4_000, 3_000).unwrap().owner, 2);
        // A newer configuration takes it at once; the older cannot take it back.
        let newer = r.claim(3, 6, 1_001, 3_000).unwrap();
        assert_eq!((newer.owner, newer.gen), (3, 6));
        assert_eq!(newer.claim(1, 5, 1_002, 3_000), None);
        assert_eq!(Record::decode(&r.encode()), Some(r));
        assert_eq!(Record::decode(&r.encode()[1..]), None);
    }

    #[test]
    fn nodes_are_the_larger_of_this_minutes_count_and_the_last_ones() {
        let m = 10 * BEAT_MS;
        let r = Record::default();
        assert_eq!(r.nodes(m), None, "never heard");
        assert!(r.beat_due(m));
        let r = r.heard(m + 1_000, 3, true);
        assert!(!r.beat_due(m + 2_000));
        assert_eq!(r.nodes(m + 2_000), Some(3));
        // Next minute: only this node has added its 1 so far.
        let r = r.heard(m + BEAT_MS + 100, 1, true);
        assert_eq!(r.nodes(m + BEAT_MS + 200), Some(3));
        // A node gone: this minute's count is all the next minute knows.
        let r = r.heard(m + BEAT_MS + 30_000, 2, false);
        assert_eq!(r.nodes(m + 2 * BEAT_MS + 1), Some(2));
        // Old (the service silent): the larger of the last two counts (the
        // last may have been read early in its minute), never the guess.
        assert_eq!(r.nodes(m + 3 * BEAT_MS), Some(3));
        assert_eq!(r.nodes(m + 30 * BEAT_MS), Some(3));
        // An answer from before the record's minute changes nothing.
        assert_eq!(r.heard(m, 9, true), r);
    }

    #[test]
    fn the_service_is_down_once_calls_have_failed_for_a_while() {
        assert!(!Record::default().down(1_000_000, 800), "never called");
        let r = Record::default().failed(10_000);
        assert!(!r.down(10_500, 800), "a first call failing as it connects");
        assert!(!r.down(10_800, 800), "down after more than stale_ms");
        assert!(r.down(10_801, 800));
        let again = Record::default().answered(10_000).failed(10_000);
        assert!(!again.down(10_801, 800), "answered since it failed");
        let r = r.failed(10_600);
        assert_eq!(r.failed_ms, 10_000, "failing since the first");
        let r = r.answered(11_000);
        assert!(!r.down(20_000, 800));
        // A restarted node reads its own key; a timed-out add reads it
        // again before adding again.
        let m = 10 * BEAT_MS;
        let b = Record::default().beat(m);
        assert_eq!((b.ask, b.add), (true, false));
        let r = Record::default().asked(m, 1);
        assert!(!r.beat_due(m), "an earlier run added its 1");
        let r = Record::default().asked(m, 0);
        let add = Beat {
            add: true,
            ask: false,
        };
        assert_eq!(r.beat(m + 1), add);
        let r = r.maybe_beat(m + 1, add);
        assert_eq!(r.beat(m + 2), b, "read again, not added again");
        assert!(
            r.asked(m + 3, 1).beat(m + 4)
                == Beat {
                    add: false,
                    ask: false
                }
        );
        assert_eq!(r.asked(m + 3, 0).beat(m + 4), add, "lost: added again");
    }

    #[test]
    fn expiry_waits_for_everything_to_slide_out() {
        let b = bound(10, 2);
        let mut s = FleetCounts::default();
        synced(&b, &mut s, 10_000, 3);
        assert!(!s.expired(11));
        assert!(s.expired(12));
        admit(&b, &mut s, 10_100, 1);
        assert!(!s.expired(11), "an unsent hit is carried");
    }
}

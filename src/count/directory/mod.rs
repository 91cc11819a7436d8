//! Which lane (set of slot keys) each bound of a configuration uses, and
//! which configurations are alive.
//!
//! Shared-data keys can never be deleted, so lanes are a bounded set of
//! reusable key prefixes (`rb:{lane}`), shared by every instance of one
//! `vm_id`. One directory value (`ratebound:dir`) records them:
//! - every configuration alive: the one in force for each instance and the
//!   superseded ones Envoy keeps while their connections drain (up to
//!   `--drain-time-s`, 600 s by default; docs/envoy-host.md). A root context joins its entry at
//!   its first tick and leaves it when Envoy destroys the context
//!   (`on_done`): the entry is gone with the last one. (Envoy also
//!   configures one more root context per configuration on the main thread
//!   that never ticks and is never destroyed; joining on the first tick
//!   leaves it out.) An entry no context joined within [`GRACE_MS`], or
//!   none ticked for [`LEASE_MS`] (its VM died), is forgotten;
//! - per lane: the bound (instance and fingerprint) using it, the tag its
//!   values carry, and the range of generations of that instance using it.
//!
//! Rules:
//! - a bound whose fingerprint was in the newest live configuration of its
//!   instance keeps that lane and tag, hence its counters;
//! - any other bound gets a lane that no live configuration uses, and a new
//!   tag, so it starts from zero;
//! - so two different bounds alive at once never share a lane, however
//!   many configurations drain;
//! - the lanes, the keys they create and the configurations alive stay
//!   within [`crate::count::budget`]; a configuration that would exceed it is
//!   refused (Envoy keeps the previous one).
//!
//! This file holds the rules and their store operations; `encoding` the
//! directory's bytes.

mod encoding;

use crate::count::budget::{self, BudgetError};
use crate::count::store::{update, Store, StoreError};
use siphasher::sip::SipHasher13;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// The directory's one shared-data key.
pub(crate) const DIRECTORY_KEY: &str = "ratebound:dir";

/// A configuration none of whose root contexts ticked for this long is
/// taken for gone (its VM died without saying so).
pub(crate) const LEASE_MS: u64 = 60_000;
/// A configuration none of whose root contexts ticked yet is kept this
/// long (Envoy may reject the push before any tick).
pub(crate) const GRACE_MS: u64 = 10_000;
/// How often a configuration's ticks refresh its `seen` time: the only
/// directory write of a steady state (every write of any key moves the
/// host's cas counter, which makes the workers' write memories guess
/// again; see `write_memory`).
pub(crate) const HEARTBEAT_MS: u64 = 5_000;
/// Root contexts of the same configuration arriving this soon after the
/// first join it even when a newer configuration of the instance exists
/// (Envoy configures the main thread first, then each worker).
pub(crate) const JOIN_MS: u64 = 10_000;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Directory {
    /// Keys for hashing caller identities, shared by every worker.
    pub seed: [u64; 2],
    /// The last generation handed out.
    pub gen: u64,
    pub live: Vec<LiveConfig>,
    pub lanes: Vec<LaneEntry>,
}

/// A configuration alive in some VM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LiveConfig {
    /// Hash of the instance name.
    pub instance: u64,
    /// Hash of the whole configuration.
    pub config: u64,
    pub gen: u64,
    /// Root contexts (one a thread) that joined and have not left.
    pub refs: u32,
    /// Some root context joined it once.
    pub joined: bool,
    pub born_ms: u64,
    pub seen_ms: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LaneEntry {
    pub instance: u64,
    pub fingerprint: u64,
    pub tag: u32,
    /// The keys of a caller table exist (created once, never deleted).
    pub table: bool,
    /// Generations of `instance` that use the lane: `first..=last`.
    pub first: u64,
    pub last: u64,
}

/// What a bound asks of the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Want {
    pub fingerprint: u64,
    /// Keyed per caller: needs a caller table.
    pub table: bool,
}

/// A bound's lane: its index (in key names) and the tag of its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assigned {
    pub lane: usize,
    pub tag: u32,
    /// The lane gets a caller table for the first time: none of its bucket
    /// keys exists yet, so they can be created without reading them first.
    pub new_table: bool,
}

/// Why a configuration could not be given lanes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisterError {
    Budget(BudgetError),
    Store(StoreError),
}

impl std::fmt::Display for RegisterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegisterError::Budget(b) => b.fmt(f),
            RegisterError::Store(s) => write!(f, "shared data: {s}"),
        }
    }
}

/// Hash of an instance name, as the directory keeps it.
fn instance_id(instance: &str) -> u64 {
    let mut h = SipHasher13::new_with_keys(0x6c61_6e65, 0x696e_7374);
    instance.hash(&mut h);
    h.finish()
}

fn new_tag(fingerprint: u64, gen: u64, lane: usize, old: u32) -> u32 {
    let mut h = SipHasher13::new_with_keys(gen, fingerprint);
    lane.hash(&mut h);
    let mut tag = h.finish() as u32;
    if tag == 0 || tag == old {
        tag = tag.wrapping_add(1).max(1);
    }
    tag
}

/// A configuration's place in the directory, from [`Directory::register`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    pub gen: u64,
    pub assigned: Vec<Assigned>,
    /// This call created the entry (rather than joining one): the one VM
    /// that should say things about the configuration once.
    pub first: bool,
}

/// What a tick learns from [`Directory::beat`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DirectoryBeat {
    /// The newest live configuration of its instance: it keeps gauges and
    /// sweeps; older ones only serve connections that are draining.
    pub current: bool,
}

impl Directory {
    fn new(seed: [u64; 2]) -> Directory {
        Directory {
            seed,
            ..Directory::default()
        }
    }

    /// Forgets configurations that left or stopped ticking.
    fn expire(&mut self, now_ms: u64) {
        self.live.retain(|l| {
            let waiting = !l.joined && now_ms.saturating_sub(l.born_ms) < GRACE_MS;
            (l.refs > 0 || waiting) && now_ms.saturating_sub(l.seen_ms) < LEASE_MS
        });
    }

    fn newest(&self, instance: u64) -> Option<&LiveConfig> {
        self.live
            .iter()
            .filter(|l| l.instance == instance)
            .max_by_key(|l| l.gen)
    }

    /// Some live configuration uses lane `e`.
    fn in_use(&self, e: &LaneEntry) -> bool {
        self.live
            .iter()
            .any(|l| l.instance == e.instance && e.first <= l.gen && l.gen <= e.last)
    }

    /// The lanes of `instance` that generation `gen` uses, by fingerprint.
    fn covering(&self, instance: u64, gen: u64) -> HashMap<u64, usize> {
        self.lanes
            .iter()
            .enumerate()
            .filter(|(_, e)| e.instance == instance && e.first <= gen && gen <= e.last)
            .map(|(i, e)| (e.fingerprint, i))
            .collect()
    }

    fn lanes_of(&self, instance: u64, gen: u64, wants: &[Want]) -> Option<Vec<Assigned>> {
        let mut by_fingerprint = self.covering(instance, gen);
        wants
            .iter()
            .map(|w| {
                let i = by_fingerprint.remove(&w.fingerprint)?;
                let e = self.lanes.get(i)?;
                Some(Assigned {
                    lane: i,
                    tag: e.tag,
                    new_table: false,
                })
            })
            .collect()
    }

    /// Keys every lane has created: a caller table each, one counter else.
    pub fn keys(&self) -> u64 {
        self.lanes
            .iter()
            .map(|e| if e.table { budget::TABLE_KEYS } else { 1 })
            .sum()
    }

    /// Joins the live entry of this configuration, or creates one with
    /// lanes for `wants` (in order). Nothing changes on error.
    pub fn register(
        &mut self,
        instance: &str,
        config: u64,
        wants: &[Want],
        now_ms: u64,
    ) -> Result<Registered, BudgetError> {
        let inst = instance_id(instance);
        self.expire(now_ms);
        let newest_gen = self.newest(inst).map(|l| l.gen);
        let join = self
            .live
            .iter()
            .filter(|l| l.instance == inst && l.config == config)
            .max_by_key(|l| l.gen)
            .filter(|l| Some(l.gen) == newest_gen || now_ms.saturating_sub(l.born_ms) < JOIN_MS)
            .map(|l| l.gen);
        if let Some(gen) = join {
            if let Some(assigned) = self.lanes_of(inst, gen, wants) {
                return Ok(Registered {
                    gen,
                    assigned,
                    first: false,
                });
            }
        }
        let mut next = self.clone();
        let registered = next.register_new(inst, config, wants, newest_gen, now_ms)?;
        *self = next;
        Ok(registered)
    }

    fn register_new(
        &mut self,
        inst: u64,
        config: u64,
        wants: &[Want],
        newest_gen: Option<u64>,
        now_ms: u64,
    ) -> Result<Registered, BudgetError> {
        if self.live.len() >= budget::LIVE_CONFIGURATIONS {
            return Err(BudgetError::Alive {
                alive: self.live.len(),
            });
        }
        let gen = self.gen + 1;
        let mut taken = vec![false; self.lanes.len()];
        let mut out: Vec<Option<Assigned>> = vec![None; wants.len()];
        // Bounds of the newest configuration keep their lanes.
        let mut keep = newest_gen
            .map(|prev| self.covering(inst, prev))
            .unwrap_or_default();
        for (w, slot) in wants.iter().zip(out.iter_mut()) {
            let Some(i) = keep.remove(&w.fingerprint) else {
                continue;
            };
            if let (Some(e), Some(t)) = (self.lanes.get_mut(i), taken.get_mut(i)) {
                e.last = gen;
                *t = true;
                *slot = Some(Assigned {
                    lane: i,
                    tag: e.tag,
                    new_table: false,
                });
            }
        }
        // Others take a lane no live configuration uses: a caller table
        // goes where one exists already, a single counter where none does.
        // Lowest first: popped from the back of reversed lists.
        let (mut free_tables, mut free_singles): (Vec<usize>, Vec<usize>) = self
            .lanes
            .iter()
            .enumerate()
            .filter(|(i, e)| !taken.get(*i).copied().unwrap_or(true) && !self.in_use(e))
            .map(|(i, _)| i)
            .rev()
            .partition(|i| self.lanes.get(*i).is_some_and(|e| e.table));
        for (w, slot) in wants.iter().zip(out.iter_mut()) {
            if slot.is_some() {
                continue;
            }
            let pick = if w.table {
                free_tables.pop().or_else(|| free_singles.pop())
            } else {
                free_singles.pop().or_else(|| free_tables.pop())
            };
            let i = match pick {
                Some(i) => i,
                None => {
                    if self.lanes.len() >= budget::LANES {
                        return Err(BudgetError::Lanes {
                            lanes: self.lanes.len(),
                            alive: self.live.len(),
                        });
                    }
                    self.lanes.push(LaneEntry::default());
                    self.lanes.len() - 1
                }
            };
            let Some(e) = self.lanes.get_mut(i) else {
                continue;
            };
            let new_table = w.table && !e.table;
            *e = LaneEntry {
                instance: inst,
                fingerprint: w.fingerprint,
                tag: new_tag(w.fingerprint, gen, i, e.tag),
                table: e.table || w.table,
                first: gen,
                last: gen,
            };
            *slot = Some(Assigned {
                lane: i,
                tag: e.tag,
                new_table,
            });
        }
        let keys = self.keys();
        if keys > budget::VM_KEYS {
            return Err(BudgetError::VmKeys {
                keys,
                alive: self.live.len(),
            });
        }
        self.gen = gen;
        self.live.push(LiveConfig {
            instance: inst,
            config,
            gen,
            refs: 0,
            joined: false,
            born_ms: now_ms,
            seen_ms: now_ms,
        });
        Ok(Registered {
            gen,
            assigned: out.into_iter().flatten().collect(),
            first: true,
        })
    }

    /// A root context of generation `gen` is gone.
    /// Returns the root contexts still in it.
    pub(crate) fn leave(&mut self, gen: u64) -> u32 {
        let mut left = 0;
        if let Some(l) = self.live.iter_mut().find(|l| l.gen == gen) {
            l.refs = l.refs.saturating_sub(1);
            left = l.refs;
        }
        self.live.retain(|l| l.refs > 0 || !l.joined);
        left
    }

    /// A tick of generation `gen`: keeps it seen, says whether it is in
    /// force. `None` when the directory no longer knows it. The bool says
    /// whether the directory changed (and must be written).
    /// `join`: this is the context's first tick (it joins the entry).
    pub(crate) fn beat(
        &mut self,
        gen: u64,
        join: bool,
        now_ms: u64,
    ) -> Option<(DirectoryBeat, bool)> {
        let before = self.live.len();
        self.expire(now_ms);
        let mut changed = self.live.len() != before;
        let inst = self.live.iter().find(|l| l.gen == gen)?.instance;
        let current = self.newest(inst).is_some_and(|l| l.gen == gen);
        let l = self.live.iter_mut().find(|l| l.gen == gen)?;
        if join {
            l.refs = l.refs.saturating_add(1);
            l.joined = true;
            changed = true;
        }
        // A clock that stepped back refreshes too.
        if now_ms.saturating_sub(l.seen_ms) >= HEARTBEAT_MS || now_ms < l.seen_ms {
            l.seen_ms = now_ms;
            changed = true;
        }
        Some((DirectoryBeat { current }, changed))
    }
}

pub(crate) fn lane_prefix(lane: usize) -> String {
    format!("rb:{lane}")
}

/// Reads the directory (a fresh one seeded with `fresh_seed` when there is
/// none or it is unreadable), applies `f` and writes it back with
/// compare-and-swap when `f` says it changed.
fn change<S: Store + ?Sized, T>(
    store: &S,
    fresh_seed: [u64; 2],
    mut f: impl FnMut(&mut Directory) -> (bool, T),
) -> Result<T, StoreError> {
    update(store, DIRECTORY_KEY, |value| {
        let old = value.and_then(Directory::decode);
        let created = old.is_none();
        let mut dir = old.unwrap_or_else(|| Directory::new(fresh_seed));
        let (changed, out) = f(&mut dir);
        ((changed || created).then(|| dir.encode()), out)
    })
}

/// The outcome of [`register`].
pub struct Registration {
    pub seed: [u64; 2],
    pub registered: Registered,
    /// Keys the lanes of this `vm_id` have created, and the
    /// configurations alive, after this registration.
    pub keys: u64,
    pub alive: usize,
}

/// Registers configuration `config` of `instance` (a root context joining
/// it). `fresh_seed` seeds a directory created now.
pub fn register<S: Store + ?Sized>(
    store: &S,
    instance: &str,
    config: u64,
    wants: &[Want],
    now_ms: u64,
    fresh_seed: [u64; 2],
) -> Result<Registration, RegisterError> {
    change(store, fresh_seed, |dir| {
        match dir.register(instance, config, wants, now_ms) {
            Ok(registered) => (
                registered.first,
                Ok(Registration {
                    seed: dir.seed,
                    registered,
                    keys: dir.keys(),
                    alive: dir.live.len(),
                }),
            ),
            Err(b) => (false, Err(RegisterError::Budget(b))),
        }
    })
    .map_err(RegisterError::Store)?
}

/// A root context of generation `gen` is going away.
pub(crate) fn leave<S: Store + ?Sized>(store: &S, gen: u64) -> Result<u32, StoreError> {
    change(store, [0, 0], |dir| (true, dir.leave(gen)))
}

/// A tick of generation `gen` (see [`Directory::beat`]).
pub(crate) fn beat<S: Store + ?Sized>(
    store: &S,
    gen: u64,
    join: bool,
    now_ms: u64,
) -> Result<Option<DirectoryBeat>, StoreError> {
    change(store, [0, 0], |dir| match dir.beat(gen, join, now_ms) {
        Some((b, changed)) => (changed, Some(b)),
        None => (false, None),
    })
}

#[cfg(test)]
mod tests;

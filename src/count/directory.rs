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

use crate::count::budget::{self, BudgetError};
use crate::count::bytes::Reader;
use crate::count::store::{update, Store, StoreError};
use siphasher::sip::SipHasher13;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// The directory's one shared-data key.
pub const DIRECTORY_KEY: &str = "ratebound:dir";

/// A configuration none of whose root contexts ticked for this long is
/// taken for gone (its VM died without saying so).
pub const LEASE_MS: u64 = 60_000;
/// A configuration none of whose root contexts ticked yet is kept this
/// long (Envoy may reject the push before any tick).
pub const GRACE_MS: u64 = 10_000;
/// How often a configuration's ticks refresh its `seen` time: the only
/// directory write of a steady state (every write of any key moves the
/// host's cas counter, which makes the workers' write memories guess
/// again; see `write_memory`).
pub const HEARTBEAT_MS: u64 = 5_000;
/// Root contexts of the same configuration arriving this soon after the
/// first join it even when a newer configuration of the instance exists
/// (Envoy configures the main thread first, then each worker).
pub const JOIN_MS: u64 = 10_000;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Directory {
    /// Keys for hashing caller identities, shared by every worker.
    pub seed: [u64; 2],
    /// The last generation handed out.
    pub gen: u64,
    pub live: Vec<LiveConfig>,
    pub lanes: Vec<LaneEntry>,
}

/// A configuration alive in some VM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveConfig {
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
pub struct LaneEntry {
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
pub struct DirectoryBeat {
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
    pub fn leave(&mut self, gen: u64) -> u32 {
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
    pub fn beat(&mut self, gen: u64, join: bool, now_ms: u64) -> Option<(DirectoryBeat, bool)> {
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

// ---- encoding: fixed-width little endian, read on every tick ----

const MAGIC: u32 = 0x7262_6431; // "rbd1"
const LIVE_BYTES: usize = 8 * 5 + 4 + 1;
const LANE_BYTES: usize = 8 * 4 + 4 + 1;

impl Directory {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(
            4 + 24 + 8 + self.live.len() * LIVE_BYTES + self.lanes.len() * LANE_BYTES,
        );
        v.extend_from_slice(&MAGIC.to_le_bytes());
        for x in [self.seed[0], self.seed[1], self.gen] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(&(self.live.len() as u32).to_le_bytes());
        v.extend_from_slice(&(self.lanes.len() as u32).to_le_bytes());
        for l in &self.live {
            for x in [l.instance, l.config, l.gen, l.born_ms, l.seen_ms] {
                v.extend_from_slice(&x.to_le_bytes());
            }
            v.extend_from_slice(&l.refs.to_le_bytes());
            v.push(u8::from(l.joined));
        }
        for e in &self.lanes {
            for x in [e.instance, e.fingerprint, e.first, e.last] {
                v.extend_from_slice(&x.to_le_bytes());
            }
            v.extend_from_slice(&e.tag.to_le_bytes());
            v.push(u8::from(e.table));
        }
        v
    }

    /// `None` for anything that is not a whole directory.
    pub fn decode(b: &[u8]) -> Option<Directory> {
        let mut r = Reader::new(b);
        if r.u32()? != MAGIC {
            return None;
        }
        let seed = [r.u64()?, r.u64()?];
        let gen = r.u64()?;
        let (n_live, n_lanes) = (r.u32()? as usize, r.u32()? as usize);
        // Lengths are checked against the bytes before anything is allocated.
        let need = n_live
            .checked_mul(LIVE_BYTES)?
            .checked_add(n_lanes.checked_mul(LANE_BYTES)?)?;
        if r.rest().len() != need {
            return None;
        }
        let mut live = Vec::with_capacity(n_live);
        for _ in 0..n_live {
            live.push(LiveConfig {
                instance: r.u64()?,
                config: r.u64()?,
                gen: r.u64()?,
                born_ms: r.u64()?,
                seen_ms: r.u64()?,
                refs: r.u32()?,
                joined: r.u8()? != 0,
            });
        }
        let mut lanes = Vec::with_capacity(n_lanes);
        for _ in 0..n_lanes {
            lanes.push(LaneEntry {
                instance: r.u64()?,
                fingerprint: r.u64()?,
                first: r.u64()?,
                last: r.u64()?,
                tag: r.u32()?,
                table: r.u8()? != 0,
            });
        }
        Some(Directory {
            seed,
            gen,
            live,
            lanes,
        })
    }
}

pub fn lane_prefix(lane: usize) -> String {
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
pub fn leave<S: Store + ?Sized>(store: &S, gen: u64) -> Result<u32, StoreError> {
    change(store, [0, 0], |dir| (true, dir.leave(gen)))
}

/// A tick of generation `gen` (see [`Directory::beat`]).
pub fn beat<S: Store + ?Sized>(
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
mod tests {
    use super::*;
    use crate::count::store::MemStore;

    fn keyed(fps: &[u64]) -> Vec<Want> {
        fps.iter()
            .map(|f| Want {
                fingerprint: *f,
                table: true,
            })
            .collect()
    }

    /// Lane and tag of each bound (whether a table is new differs between
    /// the first registration and those that join it).
    fn ids(r: &Registered) -> Vec<(usize, u32)> {
        r.assigned.iter().map(|a| (a.lane, a.tag)).collect()
    }

    fn lanes(r: &Registered) -> Vec<usize> {
        let mut l: Vec<usize> = r.assigned.iter().map(|a| a.lane).collect();
        l.sort_unstable();
        l
    }

    const T: u64 = 1_000_000;

    /// Registers a configuration and lets `contexts` root contexts tick once.
    fn push(d: &mut Directory, config: u64, fps: &[u64], contexts: u32, now: u64) -> Registered {
        let r = d.register("i", config, &keyed(fps), now).unwrap();
        for _ in 0..contexts {
            d.beat(r.gen, true, now).unwrap();
        }
        r
    }

    fn alive(d: &Directory, gen: u64) -> bool {
        d.live.iter().any(|l| l.gen == gen)
    }

    #[test]
    fn workers_of_one_configuration_join_one_entry() {
        let mut d = Directory::default();
        let a = d.register("i", 1, &keyed(&[10, 20]), T).unwrap();
        let b = d.register("i", 1, &keyed(&[10, 20]), T + 1).unwrap();
        assert!(a.first && !b.first);
        assert_eq!((a.gen, ids(&a)), (b.gen, ids(&b)));
        d.beat(a.gen, true, T + 900);
        d.beat(a.gen, true, T + 950);
        assert_eq!(d.live.len(), 1);
        assert_eq!(d.live[0].refs, 2);
    }

    #[test]
    fn unchanged_bounds_keep_lane_and_tag_changed_ones_start_fresh() {
        let mut d = Directory::default();
        let a1 = push(&mut d, 1, &[10, 20, 30], 3, T);
        // Route order changes and bound 20 is edited into 21.
        let a2 = push(&mut d, 2, &[30, 21, 10], 3, T);
        assert_eq!(ids(&a2)[0], ids(&a1)[2]);
        assert_eq!(ids(&a2)[2], ids(&a1)[0]);
        assert!(
            lanes(&a1).iter().all(|l| *l != a2.assigned[1].lane),
            "20's lane is still draining"
        );
        assert!(a1.assigned.iter().all(|a| a.tag != a2.assigned[1].tag));
    }

    #[test]
    fn a_bound_that_comes_back_does_not_resurrect_its_count() {
        let mut d = Directory::default();
        let a1 = push(&mut d, 1, &[10], 3, T);
        push(&mut d, 2, &[11], 3, T);
        let a3 = push(&mut d, 3, &[10], 3, T);
        assert_ne!(a1.assigned[0].tag, a3.assigned[0].tag);
        assert_ne!(a1.assigned[0].lane, a3.assigned[0].lane, "1 still drains");
    }

    #[test]
    fn no_two_live_configurations_share_a_lane_however_many_drain() {
        // The bypass: 100/min, then 101/min, then 5/min, the first still
        // draining. The third must not take the first's lane.
        let mut d = Directory::default();
        let c1 = push(&mut d, 1, &[100], 3, T);
        let c2 = push(&mut d, 2, &[101], 3, T);
        let c3 = push(&mut d, 3, &[5], 3, T);
        let all = [lanes(&c1), lanes(&c2), lanes(&c3)].concat();
        let mut distinct = all.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), all.len(), "{all:?}");
        // Twenty more pushes, none drained: 43 lanes, all in use.
        for k in 4..24 {
            push(&mut d, k, &[k * 1000, k * 1000 + 1], 3, T);
        }
        assert_eq!(d.lanes.len(), 3 + 20 * 2);
        assert!(d.lanes.iter().all(|e| d.in_use(e)));
    }

    #[test]
    fn a_drained_configuration_frees_its_lanes() {
        let mut d = Directory::default();
        let c1 = push(&mut d, 1, &[1, 2], 3, T);
        let c2 = push(&mut d, 2, &[3, 4], 3, T);
        assert_eq!(d.leave(c1.gen), 2);
        assert_eq!(d.leave(c1.gen), 1);
        assert!(alive(&d, c1.gen));
        assert_eq!(d.leave(c1.gen), 0);
        assert!(!alive(&d, c1.gen), "gone with its last context");
        let c3 = push(&mut d, 3, &[5, 6], 3, T);
        assert_eq!(lanes(&c3), lanes(&c1), "1's lanes reused");
        assert!(lanes(&c2).iter().all(|l| !lanes(&c3).contains(l)));
        assert_eq!(d.lanes.len(), 4, "tables reused");
        assert!(c1.assigned.iter().all(|a| a.new_table));
        assert!(c3.assigned.iter().all(|a| !a.new_table), "their keys exist");
        assert_eq!(d.keys(), 4 * budget::TABLE_KEYS);
    }

    #[test]
    fn a_context_that_never_ticks_does_not_keep_a_configuration_alive() {
        // Envoy configures one more root context per push on the main
        // thread that never ticks and is never destroyed.
        let mut d = Directory::default();
        let c1 = push(&mut d, 1, &[1], 3, T);
        let ghost = d.register("i", 1, &keyed(&[1]), T).unwrap();
        assert_eq!(ghost.gen, c1.gen);
        push(&mut d, 2, &[2], 3, T + 1);
        for _ in 0..3 {
            d.leave(c1.gen);
        }
        assert!(!alive(&d, c1.gen));
    }

    #[test]
    fn a_configuration_no_context_joined_is_forgotten_after_the_grace() {
        let mut d = Directory::default();
        let c1 = d.register("i", 1, &keyed(&[1]), T).unwrap();
        assert!(d.beat(c1.gen, false, T + GRACE_MS - 1).is_some());
        let c2 = push(&mut d, 2, &[2], 3, T + GRACE_MS);
        assert!(!alive(&d, c1.gen), "Envoy rejected it before any tick");
        assert!(alive(&d, c2.gen));
    }

    #[test]
    fn lanes_stay_bounded_over_many_reloads_that_drain() {
        let mut d = Directory::default();
        let mut prev: Option<u64> = None;
        for gen in 0..1_000u64 {
            let fps: Vec<u64> = (0..5).map(|k| gen * 100 + k).collect();
            let r = push(&mut d, gen + 1, &fps, 1, T);
            let mut l = lanes(&r);
            l.dedup();
            assert_eq!(l.len(), 5, "distinct lanes");
            if let Some(p) = prev {
                d.leave(p);
            }
            prev = Some(r.gen);
        }
        assert!(d.lanes.len() <= 10, "{} lanes", d.lanes.len());
    }

    #[test]
    fn a_configuration_that_stops_ticking_is_forgotten_after_its_lease() {
        let mut d = Directory::default();
        let c1 = push(&mut d, 1, &[1], 1, T);
        let c2 = push(&mut d, 2, &[2], 1, T);
        // c2 ticks, c1's VM died without leaving.
        for s in 1..=70 {
            d.beat(c2.gen, false, T + s * 1_000);
        }
        assert!(d.beat(c1.gen, false, T + 70_000).is_none(), "c1 forgotten");
        let c3 = push(&mut d, 3, &[3], 1, T + 70_000);
        assert_eq!(lanes(&c3), lanes(&c1));
        assert_ne!(lanes(&c3), lanes(&c2));
    }

    /// A context with a configuration joins its live entry while that is
    /// the instance's newest, however old; an older one only within
    /// `JOIN_MS` of its birth (a rollout's late starters), not after.
    #[test]
    fn a_configuration_is_joined_while_newest_or_young() {
        let mut d = Directory::default();
        let a = push(&mut d, 1, &[1], 1, T);
        let later = T + 5 * JOIN_MS;
        d.beat(a.gen, true, later - 1).unwrap();
        let again = d.register("i", 1, &keyed(&[1]), later).unwrap();
        assert_eq!((again.gen, again.first), (a.gen, false), "the newest");
        let b = push(&mut d, 2, &[2], 1, later);
        let c = push(&mut d, 3, &[3], 1, later + 1);
        let joins = |d: &mut Directory, gen: u64, at: u64| {
            d.beat(c.gen, true, at - 1).unwrap();
            d.register("i", 2, &keyed(&[2]), at).unwrap().gen == gen
        };
        assert!(joins(&mut d, b.gen, later + JOIN_MS - 1), "young");
        assert!(!joins(&mut d, b.gen, later + JOIN_MS), "too old");
    }

    /// Forgotten a lease after its last tick to the millisecond: a
    /// configuration unseen for `LEASE_MS` no longer holds its lanes.
    #[test]
    fn a_lease_runs_out_exactly_a_lease_after_the_last_tick() {
        let mut d = Directory::default();
        let c1 = push(&mut d, 1, &[1], 1, T);
        let c2 = push(&mut d, 2, &[2], 1, T);
        let live = |d: &Directory| d.live.iter().any(|l| l.gen == c1.gen);
        // c1's last tick was at T; c2's ticks run the expiry.
        d.beat(c2.gen, false, T + LEASE_MS - 1);
        assert!(live(&d), "still live");
        d.beat(c2.gen, false, T + LEASE_MS);
        assert!(!live(&d), "forgotten");
    }

    #[test]
    fn only_the_newest_of_an_instance_is_current() {
        let mut d = Directory::default();
        let c1 = push(&mut d, 1, &[1], 1, T);
        let o = d.register("other", 1, &keyed(&[1]), T).unwrap();
        assert_ne!(lanes(&c1), lanes(&o), "instances never share");
        assert!(d.beat(c1.gen, false, T + 1_000).unwrap().0.current);
        let c2 = push(&mut d, 2, &[2], 1, T + 1_600);
        assert!(!d.beat(c1.gen, false, T + 3_000).unwrap().0.current);
        assert!(d.beat(c2.gen, false, T + 3_000).unwrap().0.current);
        // The newer one is rejected by Envoy and destroyed: 1 is current again.
        d.leave(c2.gen);
        assert!(d.beat(c1.gen, false, T + 4_000).unwrap().0.current);
        assert!(d.beat(o.gen, true, T + 4_000).unwrap().0.current);
    }

    #[test]
    fn a_steady_state_writes_the_directory_once_per_heartbeat() {
        let mut d = Directory::default();
        let c = push(&mut d, 1, &[1], 3, T);
        let writes = (1..=20u64)
            .filter(|s| d.beat(c.gen, false, T + s * 1_000).unwrap().1)
            .count();
        assert_eq!(writes, 4, "every 5 s over 20 s, whatever the ticks");
        // Another context's tick in the same millisecond writes nothing; a
        // clock that stepped back refreshes `seen` (a write).
        let at = T + 20_000;
        assert!(!d.beat(c.gen, false, at).unwrap().1);
        assert!(d.beat(c.gen, false, at - 1).unwrap().1);
    }

    #[test]
    fn a_late_worker_joins_its_own_configuration_not_a_newer_one() {
        let mut d = Directory::default();
        let main = push(&mut d, 1, &[1], 1, T);
        push(&mut d, 2, &[2], 1, T + 5);
        let worker = d.register("i", 1, &keyed(&[1]), T + 10).unwrap();
        assert_eq!((worker.gen, ids(&worker)), (main.gen, ids(&main)));
    }

    #[test]
    fn the_budget_refuses_and_changes_nothing() {
        let mut d = Directory::default();
        let n = budget::VM_KEYS / budget::TABLE_KEYS;
        let all: Vec<u64> = (0..n).collect();
        push(&mut d, 1, &all, 1, T);
        let before = d.clone();
        let err = d.register("i", 2, &keyed(&[n + 1]), T).unwrap_err();
        assert!(matches!(err, BudgetError::VmKeys { .. }), "{err}");
        assert_eq!(d, before);
        // Unchanged bounds keep their lanes and fit.
        push(&mut d, 3, &all, 1, T);
    }

    /// The budget is a number of keys the VM may hold: exactly that many
    /// fit, one more does not.
    #[test]
    fn exactly_the_vm_keys_fit() {
        let tables = budget::VM_KEYS / budget::TABLE_KEYS;
        let singles = budget::VM_KEYS - tables * budget::TABLE_KEYS;
        let wants = |extra: u64| -> Vec<Want> {
            (0..tables + singles + extra)
                .map(|f| Want {
                    fingerprint: f,
                    table: f < tables,
                })
                .collect()
        };
        let mut d = Directory::default();
        assert!(d.register("i", 1, &wants(0), T).is_ok());
        assert_eq!(d.keys(), budget::VM_KEYS);
        let mut d = Directory::default();
        let err = d.register("i", 1, &wants(1), T).unwrap_err();
        assert!(matches!(err, BudgetError::VmKeys { .. }), "{err}");
    }

    /// The vm_id's budget is four configurations as large as one may be
    /// (`CONFIG_BOUNDS` bounds, 128 of them with caller tables): four of
    /// them, all alive at once, fit.
    #[test]
    fn four_configurations_of_the_largest_size_fit_in_one_vm_id() {
        let mut d = Directory::default();
        for k in 0..4u64 {
            let wants: Vec<Want> = (0..budget::CONFIG_BOUNDS as u64)
                .map(|b| Want {
                    fingerprint: k * 10_000 + b,
                    table: b < 128,
                })
                .collect();
            let r = d.register(&format!("i{k}"), k + 1, &wants, T);
            assert!(r.is_ok(), "configuration {k}: {:?}", r.err());
        }
        assert_eq!(d.lanes.len(), 4 * budget::CONFIG_BOUNDS);
    }

    #[test]
    fn too_many_configurations_alive_are_refused() {
        let mut d = Directory::default();
        for k in 0..budget::LIVE_CONFIGURATIONS as u64 {
            push(&mut d, k + 1, &[], 1, T);
        }
        let err = d.register("i", 999, &[], T).unwrap_err();
        assert!(matches!(err, BudgetError::Alive { .. }), "{err}");
    }

    #[test]
    fn the_encoding_round_trips_and_rejects_garbage() {
        let mut d = Directory::new([3, 4]);
        push(&mut d, 1, &[1, 2], 2, T);
        let single = Want {
            fingerprint: 9,
            table: false,
        };
        d.register("j", 2, &[single], T).unwrap();
        let b = d.encode();
        assert_eq!(Directory::decode(&b), Some(d));
        for cut in 0..b.len() {
            assert_eq!(Directory::decode(&b[..cut]), None);
        }
        let mut long = b.clone();
        long.push(0);
        assert_eq!(Directory::decode(&long), None);
        assert_eq!(Directory::decode(b"{\"seed\":[1,2]}"), None);
    }

    #[test]
    fn register_writes_once_per_configuration_and_agrees_across_workers() {
        let store = MemStore::new();
        let r1 = register(&store, "t", 7, &keyed(&[1, 2]), T, [3, 4]).unwrap();
        let writes = store.writes();
        let r2 = register(&store, "t", 7, &keyed(&[1, 2]), T, [5, 6]).unwrap();
        assert_eq!(store.writes(), writes, "a joining context writes nothing");
        assert!(r1.registered.first && !r2.registered.first);
        assert_eq!(ids(&r1.registered), ids(&r2.registered));
        assert_eq!((r1.seed, r2.seed), ([3, 4], [3, 4]));
        let g1 = r1.registered.gen;
        assert_eq!(
            beat(&store, g1, true, T).unwrap().map(|b| b.current),
            Some(true)
        );
        let r3 = register(&store, "t", 8, &keyed(&[1]), T, [0, 0]).unwrap();
        beat(&store, r3.registered.gen, true, T).unwrap();
        assert!(
            !beat(&store, g1, false, T).unwrap().unwrap().current,
            "superseded"
        );
        leave(&store, r3.registered.gen).unwrap();
        assert!(beat(&store, g1, false, T).unwrap().unwrap().current);
        // A budget refusal writes nothing.
        let writes = store.writes();
        let many: Vec<u64> = (100..100 + budget::VM_KEYS / budget::TABLE_KEYS + 1).collect();
        let e = register(&store, "t", 9, &keyed(&many), T, [0, 0]);
        assert!(matches!(e, Err(RegisterError::Budget(_))));
        assert_eq!(store.writes(), writes);
    }

    /// A lane's new tag is never 0 (an unwritten value's) nor the tag it
    /// replaces, even when the hash says so.
    #[test]
    fn a_new_tag_is_never_zero_nor_the_old_one() {
        for lane in 0..64 {
            let hashed = new_tag(7, 3, lane, 0);
            assert_ne!(hashed, 0);
            let again = new_tag(7, 3, lane, hashed);
            assert_ne!(again, hashed, "lane {lane}");
            assert_ne!(again, 0);
            assert_eq!(new_tag(7, 3, lane, hashed.wrapping_add(9)), hashed);
        }
    }
}

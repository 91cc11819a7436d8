//! Which lane (set of slot keys) each bound of a configuration uses.
//!
//! Lane numbers are reused across configuration pushes so the number of
//! shared-data keys stays bounded however many reloads happen. A directory
//! value (`{instance}:dir`) records, per lane, the bound fingerprint using it,
//! the tag its values carry and the generation that last used it:
//! - a bound whose fingerprint was in the current configuration keeps its
//!   lane and tag, hence its counters;
//! - any other bound gets a lane no bound of the current (still draining)
//!   configuration uses, and a fresh tag, so it starts from zero.
//!
//! Lanes in use never exceed the bounds of two consecutive configurations.

use crate::store::{update, Store, StoreError};
use serde::{Deserialize, Serialize};
use siphasher::sip::SipHasher13;
use std::hash::{Hash, Hasher};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Directory {
    /// Keys for hashing caller identities, shared by every worker.
    pub seed: [u64; 2],
    /// Hash of the configuration the lanes were last assigned for.
    pub config: u64,
    pub gen: u64,
    pub lanes: Vec<LaneEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneEntry {
    pub fingerprint: u64,
    pub tag: u32,
    pub gen: u64,
}

/// A bound's lane: its index (in key names) and the tag of its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assigned {
    pub lane: usize,
    pub tag: u32,
}

fn new_tag(fingerprint: u64, gen: u64, lane: usize, old: Option<u32>) -> u32 {
    let mut h = SipHasher13::new_with_keys(gen, fingerprint);
    lane.hash(&mut h);
    let mut tag = h.finish() as u32;
    if tag == 0 || Some(tag) == old {
        tag = tag.wrapping_add(1).max(1);
    }
    tag
}

impl Directory {
    /// Lanes for `fingerprints` under configuration `config`. Returns the
    /// assignment and whether the directory changed (and must be written).
    pub fn assign(&mut self, config: u64, fingerprints: &[u64]) -> (Vec<Assigned>, bool) {
        let same = self.config == config
            && !self.lanes.is_empty()
            && fingerprints.iter().all(|f| self.current(*f).is_some());
        if same || (fingerprints.is_empty() && self.config == config) {
            let out = fingerprints
                .iter()
                .filter_map(|f| self.current(*f))
                .collect();
            return (out, false);
        }
        let prev_gen = self.gen;
        let gen = prev_gen + 1;
        let mut out = Vec::with_capacity(fingerprints.len());
        let mut taken = vec![false; self.lanes.len()];
        // Bounds of the current configuration keep their lanes.
        let mut pending = Vec::new();
        for (k, f) in fingerprints.iter().enumerate() {
            let keep = self
                .lanes
                .iter()
                .position(|e| e.fingerprint == *f && e.gen == prev_gen && prev_gen > 0);
            match keep {
                Some(i) if !taken[i] => {
                    taken[i] = true;
                    out.push((k, i));
                }
                _ => pending.push(k),
            }
        }
        // Others take a lane no bound of the current configuration uses.
        for k in pending {
            let free = (0..self.lanes.len())
                .find(|i| !taken[*i] && (self.lanes[*i].gen < prev_gen || prev_gen == 0));
            let i = match free {
                Some(i) => i,
                None => {
                    self.lanes.push(LaneEntry {
                        fingerprint: 0,
                        tag: 0,
                        gen: 0,
                    });
                    taken.push(false);
                    self.lanes.len() - 1
                }
            };
            taken[i] = true;
            let old = Some(self.lanes[i].tag);
            self.lanes[i] = LaneEntry {
                fingerprint: fingerprints[k],
                tag: new_tag(fingerprints[k], gen, i, old),
                gen,
            };
            out.push((k, i));
        }
        for (_, i) in &out {
            self.lanes[*i].gen = gen;
        }
        out.sort_unstable();
        self.config = config;
        self.gen = gen;
        let assigned = out
            .into_iter()
            .map(|(_, i)| Assigned {
                lane: i,
                tag: self.lanes[i].tag,
            })
            .collect();
        (assigned, true)
    }

    fn current(&self, f: u64) -> Option<Assigned> {
        self.lanes
            .iter()
            .position(|e| e.fingerprint == f && e.gen == self.gen)
            .map(|i| Assigned {
                lane: i,
                tag: self.lanes[i].tag,
            })
    }
}

pub fn directory_key(instance: &str) -> String {
    format!("{instance}:dir")
}

pub fn lane_prefix(instance: &str, lane: usize) -> String {
    format!("{instance}:{lane}")
}

/// Whether configuration `config` is still the one in force for
/// `instance` (a superseded one keeps running while its connections drain
/// and must stop writing gauges and sweeping).
pub fn is_current<S: Store + ?Sized>(
    store: &S,
    instance: &str,
    config: u64,
) -> Result<bool, StoreError> {
    let value = store.get(&directory_key(instance))?.0.unwrap_or_default();
    Ok(serde_json::from_slice::<Directory>(&value).is_ok_and(|d| d.config == config))
}

/// The outcome of [`resolve`].
pub struct Resolved {
    pub directory: Directory,
    pub assigned: Vec<Assigned>,
    /// This call was the first to see the configuration (it wrote the
    /// directory): the one VM that should say things about it once.
    pub first: bool,
}

/// Reads the directory, assigns lanes for this configuration and writes it
/// back with compare-and-swap. `fresh_seed` seeds a directory created now.
pub fn resolve<S: Store + ?Sized>(
    store: &S,
    instance: &str,
    config: u64,
    fingerprints: &[u64],
    fresh_seed: [u64; 2],
) -> Result<Resolved, StoreError> {
    let key = directory_key(instance);
    update(store, &key, |value| {
        let mut dir = match value.filter(|v| !v.is_empty()) {
            Some(v) => match serde_json::from_slice::<Directory>(v) {
                Ok(d) => d,
                // Unreadable: start over rather than refuse to configure.
                Err(_) => Directory {
                    seed: fresh_seed,
                    ..Directory::default()
                },
            },
            None => Directory {
                seed: fresh_seed,
                ..Directory::default()
            },
        };
        let created = value.is_none_or(|v| v.is_empty());
        let (assigned, changed) = dir.assign(config, fingerprints);
        let write = (changed || created)
            .then(|| serde_json::to_vec(&dir).ok())
            .flatten();
        let first = write.is_some();
        (
            write,
            Resolved {
                directory: dir,
                assigned,
                first,
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_configuration_again_changes_nothing() {
        let mut d = Directory::default();
        let (a1, changed) = d.assign(1, &[10, 20]);
        assert!(changed);
        let (a2, changed) = d.assign(1, &[10, 20]);
        assert!(!changed);
        assert_eq!(a1, a2);
    }

    #[test]
    fn unchanged_bounds_keep_lane_and_tag_changed_ones_start_fresh() {
        let mut d = Directory::default();
        let (a1, _) = d.assign(1, &[10, 20, 30]);
        // Route order changes and bound 20 is edited into 21.
        let (a2, _) = d.assign(2, &[30, 21, 10]);
        assert_eq!(a2[0], a1[2]);
        assert_eq!(a2[2], a1[0]);
        assert!(
            a1.iter().all(|a| a.lane != a2[1].lane),
            "20's lane is still draining"
        );
        assert!(a1.iter().all(|a| a.tag != a2[1].tag));
    }

    #[test]
    fn a_bound_that_comes_back_does_not_resurrect_its_count() {
        let mut d = Directory::default();
        let (a1, _) = d.assign(1, &[10]);
        d.assign(2, &[11]);
        let (a3, _) = d.assign(3, &[10]);
        assert_ne!(a1[0].tag, a3[0].tag);
    }

    #[test]
    fn lanes_stay_bounded_over_many_reloads() {
        let mut d = Directory::default();
        for gen in 0..1_000u64 {
            let fps: Vec<u64> = (0..5).map(|k| gen * 100 + k).collect();
            let (a, _) = d.assign(gen + 1, &fps);
            let mut lanes: Vec<_> = a.iter().map(|x| x.lane).collect();
            lanes.sort_unstable();
            lanes.dedup();
            assert_eq!(lanes.len(), 5, "distinct lanes");
        }
        assert!(d.lanes.len() <= 10, "{} lanes", d.lanes.len());
    }

    #[test]
    fn resolve_writes_once_and_agrees_across_workers() {
        let store = crate::store::MemStore::new();
        let r1 = resolve(&store, "t", 7, &[1, 2], [3, 4]).unwrap();
        let writes = store.writes();
        let r2 = resolve(&store, "t", 7, &[1, 2], [5, 6]).unwrap();
        assert_eq!(store.writes(), writes, "second worker writes nothing");
        assert!(r1.first && !r2.first);
        assert!(is_current(&store, "t", 7).unwrap());
        resolve(&store, "t", 8, &[1], [0, 0]).unwrap();
        assert!(!is_current(&store, "t", 7).unwrap(), "superseded");
        assert_eq!(
            (r1.assigned, r1.directory.seed),
            (r2.assigned, r2.directory.seed)
        );
        assert_eq!(r2.directory.seed, [3, 4]);
    }
}

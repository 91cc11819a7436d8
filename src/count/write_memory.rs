//! A worker's memory of its own last writes, so that a caller admitted again
//! costs one compare-and-swap write instead of a read and a write.
//!
//! Why a remembered value is never trusted wrongly: Envoy hands out cas
//! values from one process-wide counter, each value once, in order (+1 per
//! successful write of any key, skipping 0; docs/envoy-host.md). The memory keeps
//! `next`, a value the counter has certainly reached: one past the cas of a
//! key we wrote moments ago, read back, plus one per write of ours since. A
//! write of ours is remembered with `next` as the cas it must have been
//! given. If that was so and nobody wrote the key since, the key still
//! carries that cas, the next write with it succeeds, and the remembered
//! bytes were the stored ones. If not, the counter was already past `next`
//! when we wrote: that value went to an earlier write, no later write of the
//! key can carry it, and the write is refused as stale, after which the
//! caller is read for real. So a write made from memory lands only if the
//! memory was right. (This rests on that numbering, proxy-wasm-cpp-host's
//! `SharedData::nextCas`: a host that numbered writes per key could let a
//! stale guess land.)
//!
//! A remembered read is only good for a decision that is then written with
//! its cas: `slots` reads again for a refusal or a caller it does not find.
//! Values repeat after 2^32 writes, so nothing older than `MAX_AGE_MS` is
//! used (2^31 writes in that time would take hundreds of millions a second)
//! and the counter is never learnt from a key nobody wrote lately. When
//! guesses keep failing (other workers write in between), the memory rests
//! for a while: contention costs a failed write now and then, not one on
//! every request.

use crate::count::store::{Store, StoreError, Versioned};
use std::cell::RefCell;

/// Remembered writes per worker and configuration, direct-mapped by key.
const SLOTS: usize = 256;
/// Memory older than this is not used (see above).
const MAX_AGE_MS: u64 = 10_000;
/// After `n` failed guesses in a row, the next `2^n` recalls (at most 64)
/// read for real.
const MAX_REST_SHIFT: u32 = 6;

#[derive(Debug, Default)]
struct WriteSlot {
    key: String,
    value: Vec<u8>,
    /// The cas the key carries if nobody wrote it since.
    cas: u32,
    at_ms: u64,
    /// Handed out by `recall` and not yet written back.
    recalled: bool,
}

#[derive(Debug)]
pub(crate) struct WriteMemory {
    slots: Vec<Option<WriteSlot>>,
    /// A value the host's cas counter has reached, and when it was learnt.
    next: Option<(u32, u64)>,
    /// Our latest write that landed, and when.
    last: (String, u64),
    misses: u32,
    rest: u32,
    /// Writes made from memory that landed (a read saved each) and that
    /// were refused as stale, since last taken.
    saved: u64,
    stale: u64,
}

impl Default for WriteMemory {
    fn default() -> Self {
        WriteMemory {
            slots: (0..SLOTS).map(|_| None).collect(),
            next: None,
            last: (String::new(), 0),
            misses: 0,
            rest: 0,
            saved: 0,
            stale: 0,
        }
    }
}

fn index(key: &str) -> usize {
    // FNV-1a: keys are ours (lane prefixes and numbers), not a caller's.
    let h = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    (h % SLOTS as u64) as usize
}

fn fresh(at_ms: u64, now_ms: u64) -> bool {
    now_ms >= at_ms && now_ms - at_ms < MAX_AGE_MS
}

/// The cas the host gives the write after the one given `cas` (0 is skipped).
fn following(cas: u32) -> u32 {
    cas.wrapping_add(1).max(1)
}

impl WriteMemory {
    fn recall(&mut self, key: &str, now_ms: u64) -> Option<(Vec<u8>, u32)> {
        if self.rest > 0 {
            self.rest -= 1;
            return None;
        }
        let slot = self.slots.get_mut(index(key))?.as_mut()?;
        if slot.key != key || !fresh(slot.at_ms, now_ms) {
            return None;
        }
        slot.recalled = true;
        Some((slot.value.clone(), slot.cas))
    }

    /// Records a write of `key` with `cas` and whether it landed. Returns a
    /// key to read back and learn the counter from (see `learned`).
    fn wrote(
        &mut self,
        key: &str,
        value: &[u8],
        cas: Option<u32>,
        landed: bool,
        now_ms: u64,
    ) -> Option<String> {
        let i = index(key);
        let guessed = self
            .slots
            .get(i)
            .and_then(Option::as_ref)
            .is_some_and(|s| s.recalled && s.key == key && Some(s.cas) == cas);
        if guessed && landed {
            self.misses = 0;
            self.saved += 1;
        } else if guessed {
            self.stale += 1;
            // Someone else wrote since the counter was learnt: back off.
            self.rest = 1 << self.misses.min(MAX_REST_SHIFT);
            self.misses += 1;
        }
        // A lower bound learnt long ago may have been lapped.
        let next = self.next.filter(|&(_, at)| fresh(at, now_ms));
        match (landed, next) {
            (true, Some((n, at))) => {
                self.next = Some((following(n), at));
                self.last.0.clear();
                self.last.0.push_str(key);
                self.last.1 = now_ms;
                self.remember(key, value, n, now_ms);
                None
            }
            (true, None) => {
                self.forget(i);
                // The counter is unknown: reading back what we just wrote
                // teaches it, unless the memory is resting anyway.
                (self.rest == 0).then(|| key.to_string())
            }
            (false, _) => {
                self.forget(i);
                // Our latest write, or a later one, shows where it is now.
                let (last, at) = &self.last;
                (guessed && !last.is_empty() && fresh(*at, now_ms)).then(|| last.clone())
            }
        }
    }

    fn forget(&mut self, i: usize) {
        if let Some(s) = self.slots.get_mut(i) {
            *s = None;
        }
    }

    /// Reads saved and stale guesses since the last call (for stats).
    pub(crate) fn take_counts(&mut self) -> (u64, u64) {
        (
            std::mem::take(&mut self.saved),
            std::mem::take(&mut self.stale),
        )
    }

    /// `key`, written by us within `MAX_AGE_MS`, reads `(value, cas)`: that
    /// cas was handed out since, so the counter is past it and not far past,
    /// as of now. It is never behind what the memory knew: that counts only
    /// writes of ours, each numbered at or past what was known, and `key` is
    /// one of them (the write just made, or `last`, our latest).
    fn learned(&mut self, key: &str, read: Versioned, now_ms: u64) {
        let (Some(value), Some(cas)) = read else {
            return;
        };
        self.next = Some((following(cas), now_ms));
        self.remember(key, &value, cas, now_ms);
    }

    /// `key` holds `value` with `cas` unless someone wrote it since.
    fn remember(&mut self, key: &str, value: &[u8], cas: u32, now_ms: u64) {
        // Buffers are reused: once warm, remembering allocates nothing.
        let Some(s) = self.slots.get_mut(index(key)) else {
            return;
        };
        let s = s.get_or_insert_with(WriteSlot::default);
        s.key.clear();
        s.key.push_str(key);
        s.value.clear();
        s.value.extend_from_slice(value);
        s.cas = cas;
        s.at_ms = now_ms;
        s.recalled = false;
    }
}

/// A store seen through a worker's memory of its writes, at `now_ms`.
pub(crate) struct Remembering<'a, S: Store + ?Sized> {
    pub store: &'a S,
    pub memory: &'a RefCell<WriteMemory>,
    pub now_ms: u64,
}

impl<S: Store + ?Sized> Store for Remembering<'_, S> {
    fn get(&self, key: &str) -> Result<Versioned, StoreError> {
        self.store.get(key)
    }

    fn set(&self, key: &str, value: &[u8], cas: Option<u32>) -> Result<bool, StoreError> {
        let result = self.store.set(key, value, cas);
        // An error leaves the key unknown: it is forgotten like a stale write.
        let landed = matches!(result, Ok(true));
        let read_back = self
            .memory
            .try_borrow_mut()
            .ok()
            .and_then(|mut m| m.wrote(key, value, cas, landed, self.now_ms));
        if let Some(k) = read_back {
            // Best effort: without it the memory only stays unused.
            if let (Ok(read), Ok(mut m)) = (self.store.get(&k), self.memory.try_borrow_mut()) {
                m.learned(&k, read, self.now_ms);
            }
        }
        result
    }

    fn recall(&self, key: &str) -> Result<(Versioned, bool), StoreError> {
        let remembered = self
            .memory
            .try_borrow_mut()
            .ok()
            .and_then(|mut m| m.recall(key, self.now_ms));
        match remembered {
            Some((value, cas)) => Ok(((Some(value), Some(cas)), true)),
            None => Ok((self.get(key)?, false)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::store::MemStore;

    fn view<'a>(
        s: &'a MemStore,
        m: &'a RefCell<WriteMemory>,
        now_ms: u64,
    ) -> Remembering<'a, MemStore> {
        Remembering {
            store: s,
            memory: m,
            now_ms,
        }
    }

    /// A store holding one counter, "k", at 0.
    fn counter_at_zero() -> MemStore {
        let s = MemStore::new();
        s.set("k", &0u32.to_le_bytes(), None).unwrap();
        s
    }

    /// Read-modify-write of a counter the way `slots` does: from memory
    /// when it can, for real when the write says the memory was stale.
    fn bump(r: &Remembering<MemStore>, key: &str) -> u32 {
        let ((mut value, mut cas), _) = r.recall(key).unwrap();
        loop {
            let n = value
                .as_deref()
                .map_or(0, |v| u32::from_le_bytes(v.try_into().unwrap()))
                + 1;
            if r.set(key, &n.to_le_bytes(), cas).unwrap() {
                return n;
            }
            (value, cas) = r.get(key).unwrap();
        }
    }

    #[test]
    fn a_worker_alone_writes_again_without_reading() {
        let s = counter_at_zero();
        let m = RefCell::default();
        assert_eq!(bump(&view(&s, &m, 1_000), "k"), 1);
        // One read for the value, one to learn the counter; then writes only.
        assert_eq!(s.reads(), 2);
        for i in 2..=5 {
            assert_eq!(bump(&view(&s, &m, 1_000), "k"), i);
        }
        assert_eq!((s.reads(), s.writes(), s.stale_writes()), (2, 6, 0));
        assert_eq!(m.borrow_mut().take_counts(), (4, 0));
        assert_eq!(m.borrow_mut().take_counts(), (0, 0));
    }

    #[test]
    fn several_keys_written_in_turn_need_no_reads_either() {
        let s = MemStore::new();
        for k in ["a", "b", "c"] {
            s.set(k, &0u32.to_le_bytes(), None).unwrap();
        }
        let m = RefCell::default();
        let mut reads = vec![];
        for _ in 0..4 {
            for k in ["a", "b", "c"] {
                bump(&view(&s, &m, 1_000), k);
            }
            reads.push(s.reads());
        }
        assert_eq!(reads, [4; 4]);
        assert_eq!(s.stale_writes(), 0);
        assert_eq!(s.get("c").unwrap().0, Some(4u32.to_le_bytes().to_vec()));
    }

    #[test]
    fn another_writer_anywhere_makes_the_memory_read_again_and_loses_nothing() {
        let s = counter_at_zero();
        let (mine, theirs) = (RefCell::default(), RefCell::default());
        bump(&view(&s, &mine, 1_000), "k");
        bump(&view(&s, &mine, 1_000), "k");
        // Another worker writes the same key, then one that writes another.
        assert_eq!(bump(&view(&s, &theirs, 1_000), "k"), 3);
        assert_eq!(bump(&view(&s, &mine, 1_000), "k"), 4);
        s.set("elsewhere", b"x", None).unwrap();
        assert_eq!(bump(&view(&s, &mine, 1_000), "k"), 5);
        assert_eq!(bump(&view(&s, &theirs, 1_000), "k"), 6);
    }

    #[test]
    fn a_guess_the_counter_gave_to_another_write_is_never_matched() {
        // Between learning the counter and writing, someone writes another
        // key: our write is given a later cas than remembered. The value we
        // remembered went to that other write; when a third party rewrites
        // our key, no cas it gets can equal it.
        let s = counter_at_zero();
        let m = RefCell::default();
        bump(&view(&s, &m, 1_000), "k");
        bump(&view(&s, &m, 1_000), "k");
        s.set("other", b"x", None).unwrap();
        bump(&view(&s, &m, 1_000), "k"); // remembered with a cas one short
        for n in 0..5u32 {
            s.set("k", &(100 + n).to_le_bytes(), None).unwrap();
            assert_eq!(bump(&view(&s, &m, 1_000), "k"), 101 + n);
        }
    }

    #[test]
    fn memory_older_than_its_age_is_read_again() {
        let s = counter_at_zero();
        let m = RefCell::default();
        bump(&view(&s, &m, 1_000), "k");
        bump(&view(&s, &m, 1_000), "k");
        let reads = s.reads();
        bump(&view(&s, &m, 1_000 + MAX_AGE_MS), "k");
        assert!(s.reads() > reads);
        // A clock that went back is no younger.
        let reads = s.reads();
        bump(&view(&s, &m, 500), "k");
        assert!(s.reads() > reads);
        assert_eq!(s.stale_writes(), 0);
    }

    #[test]
    fn when_other_writers_keep_it_wrong_the_memory_mostly_rests() {
        let s = counter_at_zero();
        let m = RefCell::default();
        for i in 0..200u32 {
            assert_eq!(bump(&view(&s, &m, 1_000), "k"), i + 1);
            // Another worker writes between every two of ours.
            s.set("other", b"x", None).unwrap();
        }
        // Guesses are tried now and then, and fail: far fewer than one a
        // request.
        let stale = s.stale_writes();
        assert!((1..20).contains(&stale), "{stale} stale writes");
        assert_eq!(m.borrow_mut().take_counts().1, stale as u64);
        // Alone again: within its longest rest (64 requests) and one more
        // learning, the memory serves again, without reads.
        for _ in 0..100 {
            bump(&view(&s, &m, 1_000), "k");
        }
        let reads = s.reads();
        for _ in 0..20 {
            bump(&view(&s, &m, 1_000), "k");
        }
        assert_eq!(s.reads(), reads, "resumed");
    }

    /// After another worker's write, one guess fails: that request reads
    /// its key and reads back where the counter is; the next rests (one
    /// read); then writes are guessed right again, without reads.
    #[test]
    fn one_foreign_write_costs_one_stale_guess_then_writes_go_unread_again() {
        let s = counter_at_zero();
        let m = RefCell::default();
        for _ in 0..3 {
            bump(&view(&s, &m, 1_000), "k");
        }
        s.set("elsewhere", b"x", None).unwrap();
        // Per request: reads and stale writes.
        let each: Vec<(usize, usize)> = (0..6)
            .map(|_| {
                let (r, w) = (s.reads(), s.stale_writes());
                bump(&view(&s, &m, 1_000), "k");
                (s.reads() - r, s.stale_writes() - w)
            })
            .collect();
        assert_eq!(each, [(0, 0), (2, 1), (1, 0), (0, 0), (0, 0), (0, 0)]);
    }

    /// A write that fails on a value really read (not on a guess) says
    /// nothing of the memory: it reads nothing back.
    #[test]
    fn a_write_that_fails_on_a_real_read_reads_nothing_back() {
        let s = counter_at_zero();
        s.set("j", &0u32.to_le_bytes(), None).unwrap();
        let m = RefCell::default();
        bump(&view(&s, &m, 1_000), "k");
        bump(&view(&s, &m, 1_000), "k");
        let r = view(&s, &m, 1_000);
        let ((_, cas), _) = r.recall("j").unwrap();
        s.set("j", &5u32.to_le_bytes(), None).unwrap(); // another worker
        let reads = s.reads();
        assert!(!r.set("j", &1u32.to_le_bytes(), cas).unwrap());
        assert_eq!(s.reads(), reads);
        assert_eq!(s.stale_writes(), 1, "ours, failed once");
    }

    /// A guess refused as stale is forgotten: until the key is written
    /// again, every recall reads it for real (here the write that would
    /// have followed was a refusal, which writes nothing).
    #[test]
    fn a_guess_refused_as_stale_is_never_recalled_again() {
        let s = MemStore::new();
        for k in ["j", "k"] {
            s.set(k, &0u32.to_le_bytes(), None).unwrap();
        }
        let m = RefCell::default();
        let r = view(&s, &m, 1_000);
        bump(&r, "j");
        bump(&r, "j");
        bump(&r, "k"); // our latest write: what the refused guess reads back
        s.set("j", &5u32.to_le_bytes(), None).unwrap(); // another worker
        let ((_, cas), from_memory) = r.recall("j").unwrap();
        assert!(from_memory);
        assert!(!r.set("j", &3u32.to_le_bytes(), cas).unwrap(), "stale");
        let five = Some(5u32.to_le_bytes().to_vec());
        for _ in 0..3 {
            let ((value, _), from_memory) = r.recall("j").unwrap();
            assert_eq!((value, from_memory), (five.clone(), false));
        }
        assert_eq!(s.stale_writes(), 1);
    }

    /// Keys that share a slot: one's memory is never guessed for the
    /// other (its write would fail, and cost a read).
    #[test]
    fn keys_sharing_a_slot_never_take_each_others_memory() {
        let s = MemStore::new();
        let first = "k0".to_string();
        let other = (1..)
            .map(|i| format!("k{i}"))
            .find(|k| index(k) == index(&first))
            .unwrap();
        for k in [&first, &other] {
            s.set(k, &0u32.to_le_bytes(), None).unwrap();
        }
        let m = RefCell::default();
        for _ in 0..3 {
            bump(&view(&s, &m, 1_000), &first);
        }
        assert_eq!(bump(&view(&s, &m, 1_000), &other), 1);
        assert_eq!(bump(&view(&s, &m, 1_000), &first), 4);
        assert_eq!(s.stale_writes(), 0);
    }
}

//! Where one bound's counters live: a fixed set of reusable keys (a "lane").
//!
//! Shared-data keys can never be deleted, so a lane's key names never carry a
//! caller, a time or a generation; those live in values. A lane has:
//! - `{prefix}:o` — one counter: the whole route for `per: route`, the
//!   shared overflow counter for keyed bounds;
//! - `{prefix}:m` — the number of callers tracked (for the cap);
//! - `{prefix}:{i}`, `i < buckets` — buckets of caller entries.
//!
//! A caller hashes to two buckets and lives in the first unless it had no
//! room (a table sized for twice the cap, 16 entries a bucket, so the
//! second choice absorbs the unlucky and a bucket pair is never full before
//! the cap is reached; most callers are found with one read). Every
//! value starts with the lane's tag: a value with another tag belongs to a
//! bound that no longer exists and reads as empty, so no count is ever
//! inherited by a different bound.

use crate::config::plan::Bound;
use crate::config::Per;
use crate::count::store::{update, Store, StoreError};
use crate::count::window::{Counts, Rate, Verdict};

/// Size of a keyed lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Table {
    pub buckets: usize,
    pub per_bucket: usize,
    /// At most this many callers are tracked at once.
    pub cap: u32,
}

impl Table {
    /// 10,000 callers in 1,250 buckets of 16: room for twice the cap.
    pub const DEFAULT: Table = Table {
        buckets: 1_250,
        per_bucket: 16,
        cap: 10_000,
    };

    /// Keys a keyed lane ever creates.
    pub const fn keys(&self) -> usize {
        self.buckets + 2
    }
}

/// One bound's storage, resolved at configure time.
#[derive(Debug, Clone)]
pub struct Lane {
    pub tag: u32,
    pub rate: Rate,
    /// None for `per: route` (one counter, no buckets).
    pub table: Option<Table>,
    /// A fleet bound's: its values hold `fleet_lane` entries.
    pub fleet: bool,
    prefix: String,
    single_key: String,
    meta_key: String,
}

/// A bucket's key, written on the stack: a lane keeps no string per bucket
/// (1,250 of them per bound in every VM would be megabytes). A prefix too
/// long for the stack (never one of the filter's `rb:{lane}`) goes to the heap.
pub(crate) enum BucketKey {
    Stack { buf: [u8; 40], len: usize },
    Heap(String),
}

impl BucketKey {
    fn new(prefix: &str, i: usize) -> BucketKey {
        // On the hot path: written by hand, no formatter.
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut n = i;
        loop {
            at -= 1;
            if let Some(d) = digits.get_mut(at) {
                *d = b'0' + (n % 10) as u8;
            }
            n /= 10;
            if n == 0 || at == 0 {
                break;
            }
        }
        let digits = digits.get(at..).unwrap_or_default();
        let len = prefix.len() + 1 + digits.len();
        let mut buf = [0u8; 40];
        match buf.get_mut(..len) {
            Some(out) => {
                let (head, tail) = out.split_at_mut(prefix.len());
                head.copy_from_slice(prefix.as_bytes());
                if let Some((colon, rest)) = tail.split_first_mut() {
                    *colon = b':';
                    rest.copy_from_slice(digits);
                }
                BucketKey::Stack { buf, len }
            }
            None => BucketKey::Heap(format!("{prefix}:{i}")),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            BucketKey::Stack { buf, len } => buf
                .get(..*len)
                .and_then(|b| std::str::from_utf8(b).ok())
                .unwrap_or(""),
            BucketKey::Heap(s) => s,
        }
    }
}

impl Lane {
    /// The lane of a compiled bound: its rate, and a caller table of `table`'s
    /// size when the bound is keyed on a caller (one counter for `per: route`).
    pub fn for_bound(bound: &Bound, prefix: &str, tag: u32, table: Table) -> Lane {
        let table = (bound.per != Per::Route).then_some(table);
        Lane {
            fleet: bound.fleet.is_some(),
            ..Lane::new(prefix, tag, bound.rate, table)
        }
    }

    pub fn new(prefix: &str, tag: u32, rate: Rate, table: Option<Table>) -> Lane {
        Lane {
            tag,
            rate,
            table,
            fleet: false,
            prefix: prefix.to_string(),
            single_key: format!("{prefix}:o"),
            meta_key: format!("{prefix}:m"),
        }
    }

    fn buckets(&self) -> usize {
        self.table.map_or(0, |t| t.buckets)
    }

    /// Its buckets (0 for `per: route`).
    pub fn bucket_count(&self) -> usize {
        self.buckets()
    }

    /// The route's counter, or a keyed lane's overflow counter.
    pub fn single_key(&self) -> &str {
        &self.single_key
    }

    /// Every key this lane uses, so they can be created ahead of use; the
    /// tracked-count key comes last (its presence says the rest exist).
    pub fn all_keys(&self) -> impl Iterator<Item = String> + '_ {
        let buckets = (0..self.buckets()).map(|i| format!("{}:{i}", self.prefix));
        let meta = self.table.map(|_| self.meta_key.clone());
        std::iter::once(self.single_key.clone())
            .chain(buckets)
            .chain(meta)
    }

    /// Creates every key of the lane that does not exist yet, the
    /// tracked-count key last, so that all later writes are compare-and-swap.
    pub fn create_keys<S: Store + ?Sized>(&self, store: &S) -> Result<(), StoreError> {
        for key in self.all_keys() {
            crate::count::store::ensure(store, &key)?;
        }
        Ok(())
    }

    /// Creates the keys of a lane that never had a caller table, without
    /// reading them first (none of its bucket keys can exist; the single
    /// counter is rewritten empty, which its new tag would read as empty
    /// anyway). Half the host calls of [`Lane::create_keys`].
    pub fn create_new_keys<S: Store + ?Sized>(&self, store: &S) -> Result<(), StoreError> {
        for key in self.all_keys() {
            store.set(&key, &[], None)?;
        }
        Ok(())
    }

    /// The key whose presence says every key of this lane exists.
    pub fn last_key(&self) -> &str {
        match self.table {
            Some(_) => &self.meta_key,
            None => &self.single_key,
        }
    }

    pub(crate) fn bucket_key(&self, i: usize) -> BucketKey {
        BucketKey::new(&self.prefix, i)
    }

    pub(crate) fn buckets_of(&self, caller: u64) -> (usize, usize) {
        let n = self.buckets().max(1) as u64;
        let a = caller % n;
        let mut b = (caller.rotate_left(32) ^ 0x9e37_79b9_7f4a_7c15) % n;
        if b == a {
            b = (a + 1) % n;
        }
        (a as usize, b as usize)
    }
}

// ---- value encodings (little endian, tag first) ----

const ENTRY: usize = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    caller: u64,
    counts: Counts,
}

// Callers check lengths first; a short slice reads as 0, never a panic.
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}
pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

fn tagged(tag: u32, value: Option<&[u8]>, len: usize) -> Option<&[u8]> {
    match value {
        Some(v) if v.len() >= 4 && u32_at(v, 0) == tag && (v.len() - 4) % len == 0 => v.get(4..),
        _ => None,
    }
}

fn decode_counts(tag: u32, value: Option<&[u8]>) -> Counts {
    match tagged(tag, value, 16) {
        Some(b) if b.len() == 16 => Counts {
            win: u64_at(b, 0),
            cur: u32_at(b, 8),
            prev: u32_at(b, 12),
        },
        _ => Counts::default(),
    }
}

fn encode_counts(tag: u32, c: Counts) -> Vec<u8> {
    let mut v = Vec::with_capacity(20);
    v.extend_from_slice(&tag.to_le_bytes());
    v.extend_from_slice(&c.win.to_le_bytes());
    v.extend_from_slice(&c.cur.to_le_bytes());
    v.extend_from_slice(&c.prev.to_le_bytes());
    v
}

fn decode_live(tag: u32, value: Option<&[u8]>) -> u32 {
    match tagged(tag, value, 4) {
        Some(b) if b.len() == 4 => u32_at(b, 0),
        _ => 0,
    }
}

fn encode_live(tag: u32, live: u32) -> Vec<u8> {
    let mut v = tag.to_le_bytes().to_vec();
    v.extend_from_slice(&live.to_le_bytes());
    v
}

fn decode_bucket(tag: u32, value: Option<&[u8]>) -> Vec<Entry> {
    tagged(tag, value, ENTRY)
        .map(|b| {
            b.chunks_exact(ENTRY)
                .map(|e| Entry {
                    caller: u64_at(e, 0),
                    counts: Counts {
                        win: u64_at(e, 8),
                        cur: u32_at(e, 16),
                        prev: u32_at(e, 20),
                    },
                })
                .collect()
        })
        .unwrap_or_default()
}

fn encode_bucket(tag: u32, entries: &[Entry]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + entries.len() * ENTRY);
    v.extend_from_slice(&tag.to_le_bytes());
    for e in entries {
        v.extend_from_slice(&e.caller.to_le_bytes());
        v.extend_from_slice(&e.counts.win.to_le_bytes());
        v.extend_from_slice(&e.counts.cur.to_le_bytes());
        v.extend_from_slice(&e.counts.prev.to_le_bytes());
    }
    v
}

// ---- the decision for one bound ----

/// The tracked count and its cas token.
pub(crate) fn tracked_with<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
) -> Result<(u32, Option<u32>), StoreError> {
    let (v, cas) = store.get(&lane.meta_key)?;
    Ok((decode_live(lane.tag, v.as_deref()), cas))
}

/// The tracked count's value for `live` callers.
pub(crate) fn encode_live_for(lane: &Lane, live: u32) -> Vec<u8> {
    encode_live(lane.tag, live)
}

/// Where a request was (or would be) counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The lane's single counter: the route, or the overflow of a keyed lane.
    Single,
    Bucket(usize),
}

/// A decision read from the store and the write that would record it.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub verdict: Verdict,
    /// The caller is untracked and shares the overflow counter.
    pub overflow: bool,
    place: Place,
    value: Vec<u8>,
    cas: Option<u32>,
    /// The write takes a free position: the tracked count must grow first
    /// (the grown count and the cas it was read with).
    reserve: Option<(Vec<u8>, Option<u32>)>,
}

impl Prepared {
    /// A decision another kind of entry made (`fleet_lane`), to be
    /// committed as this module's.
    pub(crate) fn new(
        verdict: Verdict,
        overflow: bool,
        place: Place,
        value: Vec<u8>,
        cas: Option<u32>,
        reserve: Option<(Vec<u8>, Option<u32>)>,
    ) -> Prepared {
        Prepared {
            verdict,
            overflow,
            place,
            value,
            cas,
            reserve,
        }
    }
}

/// What committing a prepared write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Committed {
    Done(Undo),
    /// Someone wrote in between: prepare again.
    Stale,
}

/// Enough to take one counted request back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Undo {
    place: Place,
    caller: u64,
    win: u64,
}

/// Reads the counters `caller` is counted in and decides one more request.
/// Nothing is written.
pub fn prepare<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    caller: u64,
    now_ms: u64,
) -> Result<Prepared, StoreError> {
    if lane.fleet {
        return Err(StoreError::Invalid("a fleet lane is decided by fleet_lane"));
    }
    let Some(table) = lane.table else {
        return prepare_single(store, lane, now_ms, false);
    };
    let (a, b) = lane.buckets_of(caller);
    let ((mut va, mut ca), recalled) = store.recall(lane.bucket_key(a).as_str())?;
    if recalled {
        // Memory serves an admission of a caller it holds, which the write
        // will check; a refusal or an absent caller is read for real.
        match prepare_in(lane, a, &mut va, ca, caller, now_ms) {
            Some(p) if p.verdict.admits() => return Ok(p),
            _ => (va, ca) = store.get(lane.bucket_key(a).as_str())?,
        }
    }
    if let Some(p) = prepare_in(lane, a, &mut va, ca, caller, now_ms) {
        return Ok(p);
    }
    let (mut vb, cb) = store.get(lane.bucket_key(b).as_str())?;
    if let Some(p) = prepare_in(lane, b, &mut vb, cb, caller, now_ms) {
        return Ok(p);
    }
    let ea = decode_bucket(lane.tag, va.as_deref());
    let eb = decode_bucket(lane.tag, vb.as_deref());
    // A new caller goes to its first bucket unless that one has no room, so
    // that finding it later costs one read. In a bucket: reclaim an expired
    // entry (the tracked count is unchanged), else take a free position if
    // the cap allows; past the cap, only expired entries are taken.
    let win = lane.rate.window_of(now_ms);
    let mut meta: Option<(u32, Option<u32>)> = None;
    for (i, entries, cas) in [(a, ea, ca), (b, eb, cb)] {
        if let Some(pos) = entries.iter().position(|e| e.counts.expired(win)) {
            let mut entries = entries;
            if let Some(e) = entries.get_mut(pos) {
                *e = Entry {
                    caller,
                    counts: Counts::default(),
                };
            }
            return Ok(admit_new(lane, i, entries, pos, cas, None, now_ms));
        }
        if entries.len() < table.per_bucket {
            let (live, meta_cas) = match meta {
                Some(m) => m,
                None => {
                    let (v, c) = store.get(&lane.meta_key)?;
                    *meta.insert((decode_live(lane.tag, v.as_deref()), c))
                }
            };
            if live < table.cap {
                let mut entries = entries;
                entries.push(Entry {
                    caller,
                    counts: Counts::default(),
                });
                let pos = entries.len() - 1;
                let reserve = Some((encode_live(lane.tag, live + 1), meta_cas));
                return Ok(admit_new(lane, i, entries, pos, cas, reserve, now_ms));
            }
        }
    }
    prepare_single(store, lane, now_ms, true)
}

fn prepare_single<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    now_ms: u64,
    overflow: bool,
) -> Result<Prepared, StoreError> {
    let ((mut v, mut cas), recalled) = store.recall(&lane.single_key)?;
    let mut verdict = lane
        .rate
        .decide(decode_counts(lane.tag, v.as_deref()), now_ms);
    if recalled && !verdict.admits() {
        // A refusal writes nothing, so nothing would check the memory.
        (v, cas) = store.get(&lane.single_key)?;
        verdict = lane
            .rate
            .decide(decode_counts(lane.tag, v.as_deref()), now_ms);
    }
    let value = match verdict {
        Verdict::Admit { counts, .. } => encode_counts(lane.tag, counts),
        Verdict::Refuse { .. } => Vec::new(),
    };
    Ok(Prepared {
        verdict,
        overflow,
        place: Place::Single,
        value,
        cas,
        reserve: None,
    })
}

/// The decision for `caller` if bucket `i` (its raw value) holds it. The
/// common path: the entry is found and rewritten in the bytes just read,
/// which become the value to write back (no copy).
fn prepare_in(
    lane: &Lane,
    i: usize,
    value: &mut Option<Vec<u8>>,
    cas: Option<u32>,
    caller: u64,
    now_ms: u64,
) -> Option<Prepared> {
    let entries = tagged(lane.tag, value.as_deref(), ENTRY)?;
    let at = entries
        .chunks_exact(ENTRY)
        .position(|e| u64_at(e, 0) == caller)?
        * ENTRY;
    let e = entries.get(at..at + ENTRY)?;
    let stored = Counts {
        win: u64_at(e, 8),
        cur: u32_at(e, 16),
        prev: u32_at(e, 20),
    };
    let verdict = lane.rate.decide(stored, now_ms);
    let value = match verdict {
        Verdict::Admit { counts, .. } => {
            let mut v = value.take().unwrap_or_default();
            let at = 4 + at;
            let fields: [(usize, &[u8]); 3] = [
                (at + 8, &counts.win.to_le_bytes()),
                (at + 16, &counts.cur.to_le_bytes()),
                (at + 20, &counts.prev.to_le_bytes()),
            ];
            for (from, bytes) in fields {
                if let Some(to) = v.get_mut(from..from + bytes.len()) {
                    to.copy_from_slice(bytes);
                }
            }
            v
        }
        Verdict::Refuse { .. } => Vec::new(),
    };
    Some(Prepared {
        verdict,
        overflow: false,
        place: Place::Bucket(i),
        value,
        cas,
        reserve: None,
    })
}

fn admit_new(
    lane: &Lane,
    i: usize,
    mut entries: Vec<Entry>,
    pos: usize,
    cas: Option<u32>,
    reserve: Option<(Vec<u8>, Option<u32>)>,
    now_ms: u64,
) -> Prepared {
    let verdict = lane.rate.decide(Counts::default(), now_ms);
    if let Verdict::Admit { counts, .. } = verdict {
        if let Some(e) = entries.get_mut(pos) {
            e.counts = counts;
        }
    }
    Prepared {
        verdict,
        overflow: false,
        place: Place::Bucket(i),
        value: encode_bucket(lane.tag, &entries),
        cas,
        reserve,
    }
}

/// The key of a place: the lane's single counter or one of its buckets.
pub(crate) enum PlaceKey<'a> {
    Single(&'a str),
    Bucket(BucketKey),
}

impl PlaceKey<'_> {
    pub(crate) fn as_str(&self) -> &str {
        match self {
            PlaceKey::Single(k) => k,
            PlaceKey::Bucket(b) => b.as_str(),
        }
    }
}

impl Lane {
    pub(crate) fn key_of(&self, place: Place) -> PlaceKey<'_> {
        match place {
            Place::Single => PlaceKey::Single(&self.single_key),
            Place::Bucket(i) => PlaceKey::Bucket(self.bucket_key(i)),
        }
    }
}

/// Records an admitted, prepared request with compare-and-swap.
pub fn commit<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    caller: u64,
    p: &Prepared,
) -> Result<Committed, StoreError> {
    let Verdict::Admit { counts, .. } = p.verdict else {
        return Err(StoreError::Invalid("refused requests are not committed"));
    };
    let undo = Undo {
        place: p.place,
        caller,
        win: counts.win,
    };
    if let Some((grown, meta_cas)) = &p.reserve {
        if !store.set(&lane.meta_key, grown, *meta_cas)? {
            return Ok(Committed::Stale);
        }
        if !store.set(lane.key_of(p.place).as_str(), &p.value, p.cas)? {
            release(store, lane, 1)?;
            return Ok(Committed::Stale);
        }
        return Ok(Committed::Done(undo));
    }
    if store.set(lane.key_of(p.place).as_str(), &p.value, p.cas)? {
        Ok(Committed::Done(undo))
    } else {
        Ok(Committed::Stale)
    }
}

/// Takes back one request recorded by [`commit`] (a later bound refused).
pub fn undo<S: Store + ?Sized>(store: &S, lane: &Lane, u: Undo) -> Result<(), StoreError> {
    if lane.fleet {
        return crate::count::fleet_lane::undo(store, lane, u.place, u.caller, u.win);
    }
    let take_back = |c: &mut Counts| {
        if c.win == u.win && c.cur > 0 {
            c.cur -= 1;
            true
        } else if c.win == u.win + 1 && c.prev > 0 {
            c.prev -= 1;
            true
        } else {
            false
        }
    };
    update(store, lane.key_of(u.place).as_str(), |v| match u.place {
        Place::Single => {
            let mut c = decode_counts(lane.tag, v);
            (take_back(&mut c).then(|| encode_counts(lane.tag, c)), ())
        }
        Place::Bucket(_) => {
            let mut entries = decode_bucket(lane.tag, v);
            let changed = entries
                .iter_mut()
                .find(|e| e.caller == u.caller)
                .is_some_and(|e| take_back(&mut e.counts));
            (changed.then(|| encode_bucket(lane.tag, &entries)), ())
        }
    })
}

fn release<S: Store + ?Sized>(store: &S, lane: &Lane, n: u32) -> Result<(), StoreError> {
    update(store, &lane.meta_key, |v| {
        let live = decode_live(lane.tag, v);
        (Some(encode_live(lane.tag, live.saturating_sub(n))), ())
    })
}

/// Removes expired callers from buckets `range` and shrinks the tracked
/// count to match. Returns how many were removed.
pub fn sweep<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    range: std::ops::Range<usize>,
    now_ms: u64,
) -> Result<u32, StoreError> {
    if lane.table.is_none() {
        return Ok(0);
    }
    let win = lane.rate.window_of(now_ms);
    let mut removed = 0u32;
    for i in range.filter(|i| *i < lane.buckets()) {
        removed += update(store, lane.bucket_key(i).as_str(), |v| {
            if lane.fleet {
                return crate::count::fleet_lane::sweep_value(lane.tag, v, win);
            }
            let mut entries = decode_bucket(lane.tag, v);
            let before = entries.len();
            entries.retain(|e| !e.counts.expired(win));
            let gone = (before - entries.len()) as u32;
            ((gone > 0).then(|| encode_bucket(lane.tag, &entries)), gone)
        })?;
    }
    if removed > 0 {
        release(store, lane, removed)?;
    }
    Ok(removed)
}

/// Callers currently tracked (expired ones count until swept or reclaimed).
pub fn tracked<S: Store + ?Sized>(store: &S, lane: &Lane) -> Result<u32, StoreError> {
    Ok(decode_live(
        lane.tag,
        store.get(&lane.meta_key)?.0.as_deref(),
    ))
}

/// The counts a caller currently holds (for tests and the CLI's inspection).
pub fn peek<S: Store + ?Sized>(
    store: &S,
    lane: &Lane,
    caller: u64,
) -> Result<Option<Counts>, StoreError> {
    if lane.table.is_none() {
        return Ok(Some(decode_counts(
            lane.tag,
            store.get(&lane.single_key)?.0.as_deref(),
        )));
    }
    let (a, b) = lane.buckets_of(caller);
    for i in [a, b] {
        let key = lane.bucket_key(i);
        let entries = decode_bucket(lane.tag, store.get(key.as_str())?.0.as_deref());
        if let Some(e) = entries.iter().find(|e| e.caller == caller) {
            return Ok(Some(e.counts));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_keys_are_distinct_for_short_and_long_prefixes() {
        for prefix in ["rb:4095", &"p".repeat(200)] {
            let keys: std::collections::HashSet<String> = (0..1_250)
                .map(|i| BucketKey::new(prefix, i).as_str().to_string())
                .collect();
            assert_eq!(keys.len(), 1_250, "{prefix}");
            assert!(keys.contains(&format!("{prefix}:1249")));
        }
    }
}

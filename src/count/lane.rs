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

use crate::count::bytes::u32_at;
use crate::count::store::{update, Store, StoreError};
use crate::count::window::{Rate, Verdict};

/// The most bounds one lane carries: a route's tiers beyond it take
/// another lane (`config::plan`'s grouping).
pub const MAX_TIERS: usize = 8;

/// Size of a keyed lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Table {
    pub buckets: usize,
    pub per_bucket: usize,
    /// At most this many callers are tracked at once.
    pub cap: u32,
}

/// Two buckets of two with room for eight: every caller's buckets are 0
/// and 1, so tests fill both with four callers.
#[cfg(test)]
pub(crate) const TWO_BY_TWO: Table = Table {
    buckets: 2,
    per_bucket: 2,
    cap: 8,
};

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

/// What a lane's values hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneKind {
    /// A node bound's counts (`node_lane`).
    Node,
    /// A fleet bound's entries (`fleet_lane`).
    Fleet,
}

/// One bound's storage, resolved at configure time.
#[derive(Debug, Clone)]
pub struct Lane {
    pub tag: u32,
    /// Its first (or only) tier's rate.
    pub rate: Rate,
    /// Every tier's rate, in its bounds' order, when the lane carries
    /// several bounds on one key (a route's tiers: [`Lane::tiered`]);
    /// empty for a lane of one bound.
    tiers: Vec<Rate>,
    /// None for `per: route` (one counter, no buckets).
    pub table: Option<Table>,
    pub kind: LaneKind,
    prefix: String,
    pub(crate) single_key: String,
    pub(crate) meta_key: String,
}

/// A bucket's key, written on the stack: a lane keeps no string per bucket
/// (1,250 of them per bound in every VM would be megabytes). A prefix too
/// long for the stack (never one of the filter's `rb:{lane}`) goes to the heap.
pub(crate) enum BucketKey {
    Stack { buf: [u8; 40], len: usize },
    Heap(String),
}

impl BucketKey {
    pub(crate) fn new(prefix: &str, i: usize) -> BucketKey {
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
    pub fn new(prefix: &str, tag: u32, rate: Rate, table: Option<Table>) -> Lane {
        Lane {
            tag,
            rate,
            tiers: Vec::new(),
            table,
            kind: LaneKind::Node,
            prefix: prefix.to_string(),
            single_key: format!("{prefix}:o"),
            meta_key: format!("{prefix}:m"),
        }
    }

    /// A node lane carrying several bounds on one key (tiers): each
    /// caller's entry holds one two-window count per rate, decided by one
    /// read and written by one compare-and-swap (`node_lane`). At most
    /// [`MAX_TIERS`] rates (more are the plan's error: it never groups
    /// more); one rate is [`Lane::new`].
    pub fn tiered(prefix: &str, tag: u32, rates: &[Rate], table: Option<Table>) -> Lane {
        let first = rates.first().copied().unwrap_or(Rate {
            limit: 1,
            window_ms: 1,
        });
        let mut lane = Lane::new(prefix, tag, first, table);
        if rates.len() > 1 {
            lane.tiers = rates.iter().take(MAX_TIERS).copied().collect();
        }
        lane
    }

    /// The prefix of its keys (`rb:{lane}`).
    pub fn prefix_key(&self) -> &str {
        &self.prefix
    }

    /// Its tiers' rates: one for a lane of one bound.
    pub fn rates(&self) -> &[Rate] {
        if self.tiers.is_empty() {
            std::slice::from_ref(&self.rate)
        } else {
            &self.tiers
        }
    }

    /// The same lane holding `kind`'s values.
    pub(crate) fn of_kind(self, kind: LaneKind) -> Lane {
        Lane { kind, ..self }
    }

    pub(crate) fn buckets(&self) -> usize {
        self.table.map_or(0, |t| t.buckets)
    }

    /// Its buckets (0 for `per: route`).
    pub(crate) fn bucket_count(&self) -> usize {
        self.buckets()
    }

    /// The route's counter, or a keyed lane's overflow counter.
    pub(crate) fn single_key(&self) -> &str {
        &self.single_key
    }

    /// Every key this lane uses, so they can be created ahead of use; the
    /// tracked-count key comes last (its presence says the rest exist).
    pub(crate) fn all_keys(&self) -> impl Iterator<Item = String> + '_ {
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
    pub(crate) fn create_new_keys<S: Store + ?Sized>(&self, store: &S) -> Result<(), StoreError> {
        for key in self.all_keys() {
            store.set(&key, &[], None)?;
        }
        Ok(())
    }

    /// The key whose presence says every key of this lane exists.
    pub(crate) fn last_key(&self) -> &str {
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

pub(crate) fn tagged(tag: u32, value: Option<&[u8]>, len: usize) -> Option<&[u8]> {
    match value {
        Some(v) if v.len() >= 4 && u32_at(v, 0) == tag && (v.len() - 4) % len == 0 => v.get(4..),
        _ => None,
    }
}

pub(crate) fn decode_live(tag: u32, value: Option<&[u8]>) -> u32 {
    match tagged(tag, value, 4) {
        Some(b) if b.len() == 4 => u32_at(b, 0),
        _ => 0,
    }
}

pub(crate) fn encode_live(tag: u32, live: u32) -> Vec<u8> {
    let mut v = tag.to_le_bytes().to_vec();
    v.extend_from_slice(&live.to_le_bytes());
    v
}

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
pub enum LanePlace {
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
    pub(crate) place: LanePlace,
    pub(crate) value: Vec<u8>,
    pub(crate) cas: Option<u32>,
    /// The write takes a free position: the tracked count must grow first
    /// (the grown count and the cas it was read with).
    pub(crate) reserve: Option<(Vec<u8>, Option<u32>)>,
    /// The units the request is charged (1 but for a cost bound's
    /// reservation).
    pub(crate) hits: u32,
    /// Which of the lane's tiers `verdict`'s quota is: the first that
    /// refused, or on admission the tightest (0 for a lane of one bound).
    pub tier: u8,
    /// When it was decided, and which tiers were charged in the window
    /// after that time's (a key ahead of the clock): with each tier's
    /// rate, where the request was charged ([`Undo::win_of`]).
    pub(crate) at_ms: u64,
    pub(crate) ahead: u16,
}

impl Prepared {
    /// A decision another kind of entry made (`fleet_lane`), to be
    /// committed as this module's.
    pub(crate) fn new(
        verdict: Verdict,
        overflow: bool,
        place: LanePlace,
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
            hits: 1,
            tier: 0,
            at_ms: 0,
            ahead: 0,
        }
    }

    /// The same decision, for a request of `hits` units.
    pub(crate) fn taking(self, hits: u32) -> Prepared {
        Prepared { hits, ..self }
    }
}

/// What committing a prepared write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Committed {
    Done(Undo),
    /// Someone wrote in between: prepare again.
    Stale,
}

/// Where a request was charged, and how much: enough to take it back, or
/// to true up its charge once its cost is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Undo {
    pub(crate) place: LanePlace,
    pub(crate) caller: u64,
    pub(crate) win: u64,
    pub(crate) hits: u32,
    /// A tiered lane's: see [`Prepared::at_ms`].
    pub(crate) at_ms: u64,
    pub(crate) ahead: u16,
}

impl Undo {
    /// The window tier `t` (of rate `rate`) charged the request in: the
    /// first tier's is `win`.
    pub(crate) fn win_of(&self, t: usize, rate: Rate) -> u64 {
        if t == 0 {
            return self.win;
        }
        let ahead = u64::from((self.ahead >> t.min(15)) & 1);
        rate.window_of(self.at_ms).saturating_add(ahead)
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
    pub(crate) fn key_of(&self, place: LanePlace) -> PlaceKey<'_> {
        match place {
            LanePlace::Single => PlaceKey::Single(&self.single_key),
            LanePlace::Bucket(i) => PlaceKey::Bucket(self.bucket_key(i)),
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
        hits: p.hits,
        at_ms: p.at_ms,
        ahead: p.ahead,
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

pub(crate) fn release<S: Store + ?Sized>(store: &S, lane: &Lane, n: u32) -> Result<(), StoreError> {
    update(store, &lane.meta_key, |v| {
        let live = decode_live(lane.tag, v);
        (Some(encode_live(lane.tag, live.saturating_sub(n))), ())
    })
}

/// Callers currently tracked (expired ones count until swept or reclaimed).
pub fn tracked<S: Store + ?Sized>(store: &S, lane: &Lane) -> Result<u32, StoreError> {
    Ok(decode_live(
        lane.tag,
        store.get(&lane.meta_key)?.0.as_deref(),
    ))
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

    /// The tracked count is read only from a value of its own layout (its
    /// tag, then one number): anything else reads as an empty table, never
    /// as a number taken from the wrong place.
    #[test]
    fn a_tracked_count_of_another_layout_reads_as_none() {
        let ok = encode_live(7, 12);
        assert_eq!(decode_live(7, Some(&ok)), 12);
        assert_eq!(decode_live(8, Some(&ok)), 0, "another tag");
        let mut long = ok.clone();
        long.extend_from_slice(&5u32.to_le_bytes());
        assert_eq!(decode_live(7, Some(&long)), 0, "two numbers");
        assert_eq!(decode_live(7, Some(&ok[..6])), 0, "cut");
        assert_eq!(decode_live(7, None), 0);
    }

    /// Every caller has two buckets in the table, distinct whenever there
    /// are two: a caller whose first bucket is full still has a second.
    #[test]
    fn every_caller_has_two_distinct_buckets_in_the_table() {
        let rate = Rate {
            limit: 5,
            window_ms: 60_000,
        };
        for buckets in [2, 3, 16, 1_250] {
            let table = Table {
                buckets,
                per_bucket: 4,
                cap: 8,
            };
            let lane = Lane::new("t", 1, rate, Some(table));
            let mut seconds = std::collections::HashSet::new();
            // Callers are hashes: splitmix64 of 0, 1, 2, ...
            let mut x = 0u64;
            for _ in 0..20_000 {
                x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = x;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                let caller = z ^ (z >> 31);
                let (a, b) = lane.buckets_of(caller);
                assert!(
                    a < buckets && b < buckets,
                    "{caller}: {a}, {b} of {buckets}"
                );
                assert_ne!(a, b, "{caller} in {buckets}");
                seconds.insert(b);
            }
            // The second buckets cover the table: callers crowded into
            // one first bucket spread out from it.
            assert!(
                seconds.len() >= buckets * 95 / 100,
                "{} of {buckets}",
                seconds.len()
            );
        }
    }
}

//! One behaviour suite for every [`Store`]: run natively over [`MemStore`]
//! by `cargo test`, and inside Envoy over real shared data by the module
//! built with `--features selftest` (the e2e tests read its report).
//!
//! Each check uses its own key prefix, so the suite can run in a store that
//! already holds other keys (shared data is never emptied).
//!
//! [`MemStore`]: crate::count::store::MemStore

use crate::config::plan::{BoundId, Plan, RouteId};
use crate::count::lane::{self, Lane, LaneKind, Table};
use crate::count::store::{update, Store, StoreError, Versioned};
use crate::count::window::{Rate, Verdict};
use crate::count::{lane_upkeep, node_lane};
use crate::pipeline::decide;
use crate::pipeline::limiter::{Caller, Limiter};
use std::cell::Cell;

type Check = Result<(), String>;

macro_rules! expect_eq {
    ($a:expr, $b:expr) => {{
        let (a, b) = ($a, $b);
        if a != b {
            return Err(format!(
                "line {}: {} = {:?}, expected {:?}",
                line!(),
                stringify!($a),
                a,
                b
            ));
        }
    }};
}

/// The suite's routes have one route.
const R0: RouteId = RouteId(0);

/// The lane of the one route's bound `b`.
fn bound_lane(lim: &Limiter, b: usize) -> Result<&Lane, String> {
    lim.lane(R0, BoundId(b))
        .ok_or_else(|| format!("no lane for bound {b}"))
}

fn e(err: StoreError) -> String {
    err.to_string()
}

/// A store that lets another writer in between one read and the next
/// write, `times` times: the compare-and-swap must notice and retry.
struct Interfering<'a, S: Store + ?Sized> {
    inner: &'a S,
    times: Cell<usize>,
    armed: Cell<Option<String>>,
}

impl<S: Store + ?Sized> Store for Interfering<'_, S> {
    fn get(&self, key: &str) -> Result<Versioned, StoreError> {
        let got = self.inner.get(key)?;
        if self.times.get() > 0 {
            self.armed.set(Some(key.to_string()));
        }
        Ok(got)
    }
    fn set(&self, key: &str, value: &[u8], cas: Option<u32>) -> Result<bool, StoreError> {
        if let Some(k) = self.armed.take() {
            if k == key {
                self.times.set(self.times.get() - 1);
                // The other writer: read-modify-write of the same key.
                let (v, c) = self.inner.get(key)?;
                let mut v = v.unwrap_or_default();
                v.push(b'x');
                self.inner.set(key, &v, c)?;
            }
        }
        self.inner.set(key, value, cas)
    }
}

fn absent_keys_read_empty_and_any_set_creates<S: Store + ?Sized>(s: &S, p: &str) -> Check {
    let k = format!("{p}:a");
    expect_eq!(s.get(&k).map_err(e)?, (None, None));
    expect_eq!(s.set(&k, b"1", None).map_err(e)?, true);
    let (v, cas) = s.get(&k).map_err(e)?;
    expect_eq!(v.as_deref(), Some(&b"1"[..]));
    if cas.is_none() {
        return Err("an existing key must have a cas".into());
    }
    Ok(())
}

fn stale_cas_is_refused<S: Store + ?Sized>(s: &S, p: &str) -> Check {
    let k = format!("{p}:b");
    s.set(&k, b"1", None).map_err(e)?;
    let (_, cas) = s.get(&k).map_err(e)?;
    expect_eq!(s.set(&k, b"2", cas).map_err(e)?, true);
    expect_eq!(s.set(&k, b"3", cas).map_err(e)?, false);
    expect_eq!(s.get(&k).map_err(e)?.0, Some(b"2".to_vec()));
    Ok(())
}

fn update_retries_until_its_write_lands<S: Store + ?Sized>(s: &S, p: &str) -> Check {
    let k = format!("{p}:c");
    s.set(&k, b"", None).map_err(e)?;
    let racy = Interfering {
        inner: s,
        times: Cell::new(3),
        armed: Cell::new(None),
    };
    let mut calls = 0;
    update(&racy, &k, |v| {
        calls += 1;
        let mut v = v.unwrap_or_default().to_vec();
        v.push(b'o');
        (Some(v), ())
    })
    .map_err(e)?;
    // Three interfering writes, each noticed; nothing lost.
    expect_eq!(calls, 4);
    let v = s.get(&k).map_err(e)?.0.unwrap_or_default();
    expect_eq!(v.iter().filter(|b| **b == b'x').count(), 3);
    expect_eq!(v.iter().filter(|b| **b == b'o').count(), 1);
    Ok(())
}

fn small() -> Table {
    Table {
        buckets: 8,
        per_bucket: 4,
        cap: 12,
    }
}

fn lane<S: Store + ?Sized>(
    s: &S,
    prefix: &str,
    limit: u32,
    table: Option<Table>,
) -> Result<Lane, String> {
    let l = Lane::new(
        prefix,
        7,
        Rate {
            limit,
            window_ms: 10_000,
        },
        table,
    );
    l.create_keys(s).map_err(e)?;
    Ok(l)
}

/// Decides and, when admitted, records one request.
fn hit<S: Store + ?Sized>(s: &S, l: &Lane, caller: u64, now: u64) -> Result<bool, String> {
    let p = node_lane::prepare(s, l, caller, now).map_err(e)?;
    if let Verdict::Refuse { .. } = p.verdict {
        return Ok(false);
    }
    match lane::commit(s, l, caller, &p).map_err(e)? {
        lane::Committed::Done(_) => Ok(true),
        lane::Committed::Stale => Err("unexpected contention".into()),
    }
}

/// A reservation trued up to a request's known cost lands in the window
/// it was charged in: this window, the previous one once the counts slid,
/// the current one after that (nothing charged is lost).
fn a_true_up_lands_where_the_reservation_did<S: Store + ?Sized>(s: &S, p: &str) -> Check {
    let l = lane(s, &format!("{p}:t"), 100, Some(small()))?;
    let t = 10_000 * 500;
    let reserve = |now: u64| -> Result<lane::Undo, String> {
        let p = node_lane::prepare_hits(s, &l, 42, now, 10).map_err(e)?;
        match lane::commit(s, &l, 42, &p).map_err(e)? {
            lane::Committed::Done(u) => Ok(u),
            lane::Committed::Stale => Err("unexpected contention".into()),
        }
    };
    let counts = |now: u64| -> Result<(u32, u32), String> {
        let c = node_lane::peek(s, &l, 42).map_err(e)?.unwrap_or_default();
        let c = c.at(now / 10_000);
        Ok((c.cur, c.prev))
    };
    let first = reserve(t)?;
    expect_eq!(counts(t)?, (10, 0));
    lane_upkeep::true_up(s, &l, first, 25).map_err(e)?;
    expect_eq!(counts(t)?, (25, 0));
    // Reserved, then the window turns (another request writes the slid
    // counts) before its cost is known: the cost lands in `prev`.
    let second = reserve(t + 1)?;
    let _ = reserve(t + 10_000)?;
    lane_upkeep::true_up(s, &l, second, 3).map_err(e)?;
    expect_eq!(counts(t + 10_000)?, (10, 28));
    // Known only once its window has slid out: in the current window.
    let third = reserve(t + 10_001)?;
    let _ = reserve(t + 30_000)?;
    lane_upkeep::true_up(s, &l, third, 40).map_err(e)?;
    expect_eq!(counts(t + 30_000)?, (40, 0));
    Ok(())
}

fn a_caller_gets_exactly_its_limit<S: Store + ?Sized>(s: &S, p: &str) -> Check {
    let l = lane(s, &format!("{p}:d"), 3, Some(small()))?;
    let t = 1_000_000;
    let admitted = (0..10)
        .filter(|i| hit(s, &l, 42, t + i).unwrap_or(false))
        .count();
    expect_eq!(admitted, 3);
    // Another caller has its own budget.
    expect_eq!(hit(s, &l, 43, t + 20)?, true);
    // Two windows later the first one is admitted again.
    expect_eq!(hit(s, &l, 42, t + 20_000)?, true);
    Ok(())
}

fn callers_past_the_cap_share_the_overflow_counter<S: Store + ?Sized>(s: &S, p: &str) -> Check {
    let l = lane(s, &format!("{p}:e"), 2, Some(small()))?;
    let t = 2_000_000;
    for caller in 0..12u64 {
        let pr = node_lane::prepare(s, &l, caller * 7919, t).map_err(e)?;
        expect_eq!(pr.overflow, false);
        hit(s, &l, caller * 7919, t)?;
    }
    expect_eq!(lane::tracked(s, &l).map_err(e)?, 12);
    // Full: newcomers are neither refused outright nor unbounded.
    let p1 = node_lane::prepare(s, &l, 1_000_001, t).map_err(e)?;
    expect_eq!(p1.overflow, true);
    expect_eq!(hit(s, &l, 1_000_001, t)?, true);
    expect_eq!(hit(s, &l, 1_000_002, t)?, true);
    expect_eq!(hit(s, &l, 1_000_003, t)?, false);
    expect_eq!(lane::tracked(s, &l).map_err(e)?, 12);
    // Two windows on, expired callers are reclaimed before overflow.
    let later = t + 20_000;
    let p2 = node_lane::prepare(s, &l, 1_000_004, later).map_err(e)?;
    expect_eq!(p2.overflow, false);
    expect_eq!(hit(s, &l, 1_000_004, later)?, true);
    // And a sweep forgets the rest.
    let removed = lane_upkeep::sweep(s, &l, 0..8, later).map_err(e)?;
    expect_eq!(removed, 11);
    expect_eq!(lane::tracked(s, &l).map_err(e)?, 1);
    Ok(())
}

fn a_new_tag_starts_from_zero<S: Store + ?Sized>(s: &S, p: &str) -> Check {
    let prefix = format!("{p}:f");
    let old = lane(s, &prefix, 1, Some(small()))?;
    let t = 3_000_000;
    expect_eq!(hit(s, &old, 5, t)?, true);
    expect_eq!(hit(s, &old, 5, t + 1)?, false);
    // Same keys, another bound: nothing inherited.
    let new = Lane::new(&prefix, 8, old.rate, old.table);
    expect_eq!(hit(s, &new, 5, t + 2)?, true);
    expect_eq!(lane::tracked(s, &new).map_err(e)?, 1);
    Ok(())
}

fn limiter(s: &(impl Store + ?Sized), p: &str, bounds: &str) -> Result<Limiter, String> {
    let json = format!(r#"{{"instance":"suite","routes":[{{"name":"r","bounds":[{bounds}]}}]}}"#);
    let config = crate::config::parse(json.as_bytes()).map_err(|es| format!("{es:?}"))?;
    Limiter::in_store(Plan::compile(&config), [1, 2], s, (p, 7), small()).map_err(e)
}

fn a_refused_request_is_counted_by_no_bound<S: Store + ?Sized>(s: &S, p: &str) -> Check {
    let lim = limiter(
        s,
        &format!("{p}-g"),
        r#"{"per":"route","limit":100,"window":"PT1M"},{"per":"address","limit":50,"window":"PT1M"},{"per":"address","limit":2,"window":"PT10S"}"#,
    )?;
    let a = Caller {
        address: "10.0.0.1",
        identity: None,
        model: None,
    };
    let t = 60_000 * 1_000;
    for _ in 0..2 {
        expect_eq!(decide(&lim, s, R0, None, &a, t).refused, None);
    }
    for _ in 0..5 {
        expect_eq!(
            decide(&lim, s, R0, None, &a, t).refused.map(|r| r.0 .0),
            Some(2)
        );
    }
    // Bounds 0 and 1 saw two requests, not seven (plus one from elsewhere).
    expect_eq!(
        decide(
            &lim,
            s,
            R0,
            None,
            &Caller {
                address: "10.0.0.2",
                identity: None,
                model: None,
            },
            t
        )
        .refused,
        None
    );
    let l0 = bound_lane(&lim, 0)?;
    expect_eq!(
        node_lane::peek(s, l0, 0).map_err(e)?.map(|c| c.cur),
        Some(3)
    );
    let l1 = bound_lane(&lim, 1)?;
    let key = lim.caller_key(crate::config::Per::Address, &a);
    expect_eq!(
        node_lane::peek(s, l1, key).map_err(e)?.map(|c| c.cur),
        Some(2)
    );
    Ok(())
}

fn a_late_refusal_takes_back_earlier_bounds<S: Store + ?Sized>(s: &S, p: &str) -> Check {
    // Bound 1's value changes between this request's read and its write
    // (another worker admitted the caller's last request there): the
    // re-read refuses, and bound 0's count is taken back.
    let lim = limiter(
        s,
        &format!("{p}-h"),
        // Bound 0 is shadow so that the two keep lanes of their own
        // (bounds on one key share one: `tiers_on_one_key_share_one_entry`).
        r#"{"per":"route","limit":100,"window":"PT1M","shadow":true},{"per":"route","limit":1,"window":"PT1M"}"#,
    )?;
    let t = 60_000 * 2_000;
    let racy = RaceOnce {
        inner: s,
        key: format!("{p}-h:1:o"),
        lim: &lim,
        fired: Cell::new(false),
    };
    let d = decide(&lim, &racy, R0, None, &Caller::default(), t);
    expect_eq!(racy.fired.get(), true);
    expect_eq!(d.refused.map(|r| r.0 .0), Some(1));
    expect_eq!(
        node_lane::peek(s, bound_lane(&lim, 0)?, 0)
            .map_err(e)?
            .map(|c| c.cur),
        Some(1)
    );
    expect_eq!(
        node_lane::peek(s, bound_lane(&lim, 1)?, 0)
            .map_err(e)?
            .map(|c| c.cur),
        Some(1)
    );
    Ok(())
}

/// Counts the writes to keys starting with `prefix`.
struct Writes<'a, S: Store + ?Sized> {
    inner: &'a S,
    prefix: String,
    sets: Cell<usize>,
}

impl<S: Store + ?Sized> Store for Writes<'_, S> {
    fn get(&self, key: &str) -> Result<Versioned, StoreError> {
        self.inner.get(key)
    }
    /// Counts the writes that landed: a compare-and-swap refused (another
    /// worker's write came first; in Envoy every worker runs the suite)
    /// writes nothing and is retried.
    fn set(&self, key: &str, value: &[u8], cas: Option<u32>) -> Result<bool, StoreError> {
        let landed = self.inner.set(key, value, cas)?;
        if landed && key.starts_with(&self.prefix) {
            self.sets.set(self.sets.get() + 1);
        }
        Ok(landed)
    }
}

/// Issue 41: a route's bounds on one key (tiers) keep their windows in one
/// entry: one write an admitted request; each tier admits and refuses as
/// its own bound would (the refusal names it, with its wait); a request
/// a later bound refuses is counted by no tier.
fn tiers_on_one_key_share_one_entry<S: Store + ?Sized>(s: &S, p: &str) -> Check {
    let prefix = format!("{p}-i");
    let lim = limiter(
        s,
        &prefix,
        r#"{"name":"second","per":"address","limit":2,"window":"PT1S"},{"name":"minute","per":"address","limit":3,"window":"PT1M"},{"name":"cap","per":"route","limit":4,"window":"PT1H"}"#,
    )?;
    let (l0, t0) = lim.tier_of(R0, BoundId(0)).ok_or("no lane for bound 0")?;
    let (l1, t1) = lim.tier_of(R0, BoundId(1)).ok_or("no lane for bound 1")?;
    expect_eq!(
        (l0.prefix_key(), t0, l1.prefix_key(), t1),
        (l0.prefix_key(), 0, l0.prefix_key(), 1)
    );
    let a = Caller {
        address: "10.0.0.1",
        identity: None,
        model: None,
    };
    let key = lim.caller_key(crate::config::Per::Address, &a);
    let w = Writes {
        inner: s,
        prefix: l0.prefix_key().to_string(),
        sets: Cell::new(0),
    };
    let t = 3_600_000 * 100;
    expect_eq!(decide(&lim, &w, R0, None, &a, t).refused, None);
    let before = w.sets.get();
    expect_eq!(decide(&lim, &w, R0, None, &a, t + 10).refused, None);
    // A known caller: one compare-and-swap for both tiers.
    expect_eq!(w.sets.get() - before, 1);
    let second = Rate {
        limit: 2,
        window_ms: 1_000,
    };
    let c = |cur| crate::count::window::Counts {
        win: t / 1_000,
        cur,
        prev: 0,
    };
    let d = decide(&lim, &w, R0, None, &a, t + 20);
    expect_eq!(
        d.refused.map(|(b, q)| (b.0, q.remaining, q.reset_ms)),
        Some((0, 0, second.wait_ms(c(2), t + 20)))
    );
    // Two seconds on, the second's window is empty; the minute has one left.
    let d = decide(&lim, &w, R0, None, &a, t + 2_000);
    expect_eq!(d.refused, None);
    expect_eq!(d.tightest.map(|(b, q)| (b.0, q.remaining)), Some((1, 0)));
    let d = decide(&lim, &w, R0, None, &a, t + 4_000);
    expect_eq!(d.refused.map(|(b, q)| (b.0, q.remaining)), Some((1, 0)));
    let tier = |i| node_lane::peek_tier(s, l0, key, i).map_err(e);
    expect_eq!(tier(0)?.map(|c| c.cur), Some(1));
    expect_eq!(tier(1)?.map(|c| c.cur), Some(3));
    // The route's own bound (another lane): 3 of 4 taken, another caller
    // takes the last, and its next request is counted by no tier.
    let b = Caller {
        address: "10.0.0.2",
        ..a
    };
    expect_eq!(decide(&lim, s, R0, None, &b, t + 4_000).refused, None);
    let d = decide(&lim, s, R0, None, &b, t + 4_000);
    expect_eq!(d.refused.map(|(b, _)| b.0), Some(2));
    let kb = lim.caller_key(crate::config::Per::Address, &b);
    expect_eq!(
        node_lane::peek_tier(s, l0, kb, 1)
            .map_err(e)?
            .map(|c| c.cur),
        Some(1)
    );
    Ok(())
}

/// Before the first write to `key`, another worker's whole request runs.
struct RaceOnce<'a, S: Store + ?Sized> {
    inner: &'a S,
    key: String,
    lim: &'a Limiter,
    fired: Cell<bool>,
}

impl<S: Store + ?Sized> Store for RaceOnce<'_, S> {
    fn get(&self, key: &str) -> Result<Versioned, StoreError> {
        self.inner.get(key)
    }
    fn set(&self, key: &str, value: &[u8], cas: Option<u32>) -> Result<bool, StoreError> {
        if key == self.key && !self.fired.replace(true) {
            let now = 60_000 * 2_000;
            let d = decide(self.lim, self.inner, R0, None, &Caller::default(), now);
            if d.refused.is_some() {
                return Err(StoreError::Invalid("the other worker was refused"));
            }
        }
        self.inner.set(key, value, cas)
    }
}

/// A fleet key through its whole cycle: alone it takes its share, a sync
/// takes exactly what it admitted, the fleet's answer then decides, a
/// failed sync puts its hits back.
fn a_fleet_key_syncs_exactly_what_it_admitted<S: Store + ?Sized>(s: &S, p: &str) -> Check {
    use crate::count::fleet::Failure;
    use crate::count::fleet_lane::{self, Fleet, Known, SyncOutcome};
    let mut l = lane(s, &format!("{p}:f"), 6, Some(small()))?;
    l.kind = LaneKind::Fleet;
    let fleet = Fleet {
        stale_ms: 2_000,
        sync_ms: 200,
    };
    // The service down: the outage share, limit / 2.
    let known = || Known {
        nodes: 2,
        down: true,
        counted: true,
    };
    let t = 4_000_000;
    let hit = |now: u64| -> Result<bool, String> {
        let d = fleet_lane::prepare(s, &l, fleet, (42, 43), 1, &known, now).map_err(e)?;
        if !d.prepared.verdict.admits() {
            return Ok(false);
        }
        match lane::commit(s, &l, 42, &d.prepared).map_err(e)? {
            lane::Committed::Done(_) => Ok(true),
            lane::Committed::Stale => Err("unexpected contention".into()),
        }
    };
    let mut admitted = 0;
    for i in 0..10 {
        admitted += u32::from(hit(t + i)?);
    }
    expect_eq!(admitted, 3);
    let taken = fleet_lane::take(s, &l, t + 100).map_err(e)?;
    expect_eq!(
        taken.iter().map(|x| x.sent.hits).collect::<Vec<_>>(),
        vec![3]
    );
    let first = *taken.first().ok_or("nothing taken")?;
    fleet_lane::settle(
        s,
        &l,
        &[(first, SyncOutcome::Count { fleet: 5, nodes: 2 })],
        t + 101,
    )
    .map_err(e)?;
    expect_eq!(hit(t + 200)?, true);
    expect_eq!(hit(t + 201)?, false);
    let again = fleet_lane::take(s, &l, t + 300).map_err(e)?;
    let second = *again.first().ok_or("nothing taken")?;
    expect_eq!(second.sent.hits, 1);
    fleet_lane::settle(
        s,
        &l,
        &[(second, SyncOutcome::Failed(Failure::NotCounted))],
        t + 301,
    )
    .map_err(e)?;
    let back = fleet_lane::peek(s, &l, 42)
        .map_err(e)?
        .map(|x| x.counts.unsynced);
    expect_eq!(back, Some(1));
    Ok(())
}

/// A fleet key's cost: the reservation trued up before its sync is sent
/// as the true cost; trued down after a sync took it, the sent units stay;
/// trued up after, the rest goes with the next sync.
fn a_fleet_cost_is_synced_as_its_true_total<S: Store + ?Sized>(s: &S, p: &str) -> Check {
    use crate::count::fleet_lane::{self, Fleet, Known};
    let mut l = lane(s, &format!("{p}:g"), 1_000, Some(small()))?;
    l.kind = LaneKind::Fleet;
    let fleet = Fleet {
        stale_ms: 2_000,
        sync_ms: 200,
    };
    let known = || Known {
        nodes: 1,
        down: true,
        counted: true,
    };
    let t = 5_000_000;
    let reserve = |now: u64| -> Result<lane::Undo, String> {
        let d = fleet_lane::prepare(s, &l, fleet, (42, 43), 10, &known, now).map_err(e)?;
        match lane::commit(s, &l, 42, &d.prepared).map_err(e)? {
            lane::Committed::Done(u) => Ok(u),
            lane::Committed::Stale => Err("unexpected contention".into()),
        }
    };
    let sent = |now: u64| -> Result<Vec<u32>, String> {
        let taken = fleet_lane::take(s, &l, now).map_err(e)?;
        let hits = taken.iter().map(|x| x.sent.hits).collect();
        let answers: Vec<_> = taken
            .into_iter()
            .map(|x| (x, fleet_lane::SyncOutcome::Count { fleet: 0, nodes: 1 }))
            .collect();
        fleet_lane::settle(s, &l, &answers, now).map_err(e)?;
        Ok(hits)
    };
    let first = reserve(t)?;
    lane_upkeep::true_up(s, &l, first, 25).map_err(e)?;
    expect_eq!(sent(t + 1)?, vec![25]);
    let second = reserve(t + 2)?;
    expect_eq!(sent(t + 3)?, vec![10]);
    lane_upkeep::true_up(s, &l, second, 3).map_err(e)?;
    lane_upkeep::true_up(s, &l, reserve(t + 4)?, 40).map_err(e)?;
    expect_eq!(sent(t + 5)?, vec![40]);
    Ok(())
}

type Test<S> = (&'static str, fn(&S, &str) -> Check);

/// Runs every check; `prefix` keeps this run's keys apart from others.
pub fn run<S: Store>(store: &S, prefix: &str) -> Vec<(&'static str, Check)> {
    let tests: [Test<S>; 12] = [
        (
            "absent_keys_read_empty_and_any_set_creates",
            absent_keys_read_empty_and_any_set_creates,
        ),
        ("stale_cas_is_refused", stale_cas_is_refused),
        (
            "update_retries_until_its_write_lands",
            update_retries_until_its_write_lands,
        ),
        (
            "a_caller_gets_exactly_its_limit",
            a_caller_gets_exactly_its_limit,
        ),
        (
            "callers_past_the_cap_share_the_overflow_counter",
            callers_past_the_cap_share_the_overflow_counter,
        ),
        ("a_new_tag_starts_from_zero", a_new_tag_starts_from_zero),
        (
            "a_refused_request_is_counted_by_no_bound",
            a_refused_request_is_counted_by_no_bound,
        ),
        (
            "a_late_refusal_takes_back_earlier_bounds",
            a_late_refusal_takes_back_earlier_bounds,
        ),
        (
            "a_fleet_key_syncs_exactly_what_it_admitted",
            a_fleet_key_syncs_exactly_what_it_admitted,
        ),
        (
            "a_true_up_lands_where_the_reservation_did",
            a_true_up_lands_where_the_reservation_did,
        ),
        (
            "a_fleet_cost_is_synced_as_its_true_total",
            a_fleet_cost_is_synced_as_its_true_total,
        ),
        (
            "tiers_on_one_key_share_one_entry",
            tiers_on_one_key_share_one_entry,
        ),
    ];
    tests
        .iter()
        .map(|(name, f)| (*name, f(store, &format!("{prefix}-{name}"))))
        .collect()
}

/// Runs the suite and reports one line per check plus a closing line
/// `store suite: N passed, M failed`. Every VM of an Envoy shares the
/// store, so each run needs its own `prefix`.
pub fn report<S: Store>(store: &S, prefix: &str, mut log: impl FnMut(&str)) {
    let results = run(store, prefix);
    let failed = results.iter().filter(|(_, r)| r.is_err()).count();
    for (name, r) in &results {
        match r {
            Ok(()) => log(&format!("store suite: ok {name}")),
            Err(m) => log(&format!("store suite: FAILED {name}: {m}")),
        }
    }
    log(&format!(
        "store suite: {} passed, {failed} failed",
        results.len() - failed
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::store::MemStore;

    #[test]
    fn the_suite_passes_on_the_in_memory_store() {
        let store = MemStore::new();
        for (name, r) in run(&store, "native") {
            assert_eq!(r, Ok(()), "{name}");
        }
    }

    #[test]
    fn the_suite_can_fail() {
        // A store that loses writes must fail the suite.
        struct Lossy(MemStore);
        impl Store for Lossy {
            fn get(&self, k: &str) -> Result<Versioned, StoreError> {
                self.0.get(k)
            }
            fn set(&self, k: &str, v: &[u8], _: Option<u32>) -> Result<bool, StoreError> {
                self.0.set(k, v, None)
            }
        }
        let results = run(&Lossy(MemStore::new()), "lossy");
        assert!(results.iter().any(|(_, r)| r.is_err()));
    }
}

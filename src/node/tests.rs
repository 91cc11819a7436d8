//! A root context's life, natively: nodes over a recording host
//! ([`MockNodeHost`]); several nodes over one host are several root
//! contexts of one Envoy (one store).
#![allow(clippy::indexing_slicing)]

use super::mock::{Call, MockNodeHost, MockStats};
use super::{Active, NodeStat, RootState};
use crate::count::directory;
use crate::count::lane::Table;
use crate::node::fleet_sync::{self, Settled};
use crate::node::warm_up;
use crate::pipeline::mock::{request, SMALL};
use crate::pipeline::Level;
use crate::rls::proto;
use prost::Message;

const T0: u64 = 600_000;

/// A fleet bound of `limit` a minute per address, synced every 200 ms.
fn fleet(limit: u32) -> String {
    format!(
        r#"{{"instance":"api",
        "rate_limit_service":{{"cluster":"rls","domain":"api","sync_ms":200,"fleet_nodes":3}},
        "routes":[{{"name":"api","bounds":[
          {{"name":"fleet","per":"address","limit":{limit},"window":"PT1M","scope":"fleet"}}]}}]}}"#
    )
}

/// A sign-in bound the rate-limit service counts (its calls are warmed);
/// `warm_up`'s tests read it too.
pub(super) const SIGN_IN: &str = r#"{
    "instance": "s",
    "rate_limit_service": {"cluster": "rls", "domain": "signin"},
    "routes": [{"name": "login", "account": {"header": "x-login"},
        "bounds": [{"name": "attempts", "per": "account", "scope": "installation",
                    "limit": 5, "window": "PT1M"}]}]
}"#;

fn node(host: &mut MockNodeHost, me: u64, json: &str) -> RootState<MockStats> {
    let mut n = RootState::new(me, SMALL);
    assert!(n.configure(host, json.as_bytes().to_vec()));
    n
}

/// One request from `address` through configuration `active`: admitted?
fn hit(host: &mut MockNodeHost, active: &Active<MockStats>, address: &str) -> bool {
    let from = format!("{address}:5000").into_bytes();
    host.pipe.properties.insert("source.address".into(), from);
    host.pipe.replies.clear();
    request(active.worker(), &mut host.pipe);
    host.pipe.replies.is_empty()
}

/// `k` requests from `address`: how many were admitted.
fn hits(host: &mut MockNodeHost, active: &Active<MockStats>, address: &str, k: u32) -> u32 {
    (0..k).map(|_| u32::from(hit(host, active, address))).sum()
}

/// The service's answer to `call`: every descriptor counted with its
/// hits, and a bound's key `extra` more (what the other nodes sent).
fn answer_to(call: &Call, extra: u32) -> Vec<u8> {
    let req = proto::RateLimitRequest::decode(call.message.as_slice()).unwrap();
    let statuses = req
        .descriptors
        .iter()
        .map(|d| {
            let limit = d.limit.clone().unwrap();
            let mut n = d.hits_addend.as_ref().map_or(1, |h| h.value) as u32;
            if d.entries[0].key == "bound" {
                n += extra;
            }
            proto::DescriptorStatus {
                code: 1,
                limit_remaining: limit.requests_per_unit.saturating_sub(n),
                current_limit: Some(proto::RateLimit {
                    requests_per_unit: limit.requests_per_unit,
                    unit: limit.unit,
                    name: String::new(),
                }),
                duration_until_reset: None,
            }
        })
        .collect();
    proto::RateLimitResponse {
        overall_code: 1,
        statuses,
    }
    .encode_to_vec()
}

/// The bound keys a call carries, with the hits it sends for each.
fn bound_keys(call: &Call) -> Vec<u64> {
    let req = proto::RateLimitRequest::decode(call.message.as_slice()).unwrap();
    req.descriptors
        .iter()
        .filter(|d| d.entries[0].key == "bound")
        .map(|d| d.hits_addend.as_ref().map_or(1, |h| h.value))
        .collect()
}

/// Ticks `node` at `now`; the calls it made.
fn tick(host: &mut MockNodeHost, node: &mut RootState<MockStats>, now: u64) -> Vec<Call> {
    host.pipe.now = now;
    node.tick(host);
    host.take_calls()
}

/// A reload (a new root context with the new configuration) while the old
/// one's sync is in flight. The old call's answer is settled against the
/// old configuration, whose draining connections then decide with the
/// fleet's count (settled against the other, the key would stay "new": a
/// tenth of its share); the new context takes the lease at once, not when
/// the old one's runs out (else the fleet syncs nothing for up to 3 s
/// after every reload).
#[test]
fn a_reload_mid_sync_settles_the_old_call_as_sent_and_the_new_context_syncs_at_once() {
    let mut host = MockNodeHost::new(T0);
    let mut old = node(&mut host, 1, &fleet(300));
    let a = old.active().unwrap();
    assert!(hit(&mut host, &a, "10.0.0.1"));
    let sent = tick(&mut host, &mut old, T0);
    assert_eq!(sent.iter().map(bound_keys).collect::<Vec<_>>(), [vec![1]]);
    // The reload: a new root context, a newer generation.
    let mut new = node(&mut host, 2, &fleet(301));
    assert!(new.active().unwrap().gen > a.gen);
    assert!(!tick(&mut host, &mut new, T0 + 100).is_empty(), "at once");
    // The old call's answer comes after it.
    host.pipe.now = T0 + 150;
    let settled = host.answer(&mut old, sent[0].token, 0, &answer_to(&sent[0], 0));
    assert_eq!(settled, Some(Settled::Answered));
    // The old configuration knows the fleet's count: its share, not a
    // tenth of it.
    assert_eq!(hits(&mut host, &a, "10.0.0.1", 50), 50);
    assert!(!host.stats_of(0).contains(&NodeStat::StoreError));
    // The old context syncs no more: the lease is the new one's.
    assert!(tick(&mut host, &mut old, T0 + 1_100).is_empty());
}

/// A root context reconfigured in place while its sync is in flight
/// settles the answer against the configuration that sent it (settled
/// against the one in force at the answer, the old configuration's key
/// would never get its count and stay new to the node, a tenth of its
/// share for its draining connections).
#[test]
fn an_answer_is_settled_against_the_configuration_that_sent_it() {
    let mut host = MockNodeHost::new(T0);
    let mut n = node(&mut host, 1, &fleet(300));
    let a = n.active().unwrap();
    assert!(hit(&mut host, &a, "10.0.0.2"));
    let sent = tick(&mut host, &mut n, T0);
    assert!(n.configure(&mut host, fleet(301).into_bytes()));
    let b = n.active().unwrap();
    assert!(b.gen > a.gen);
    host.pipe.now = T0 + 50;
    let settled: Vec<_> = sent
        .iter()
        .filter_map(|c| host.answer(&mut n, c.token, 0, &answer_to(c, 0)))
        .collect();
    assert_eq!(settled, [Settled::Answered]);
    assert_eq!(hits(&mut host, &a, "10.0.0.2", 50), 50, "A has its count");
    assert!(host.stats_of(1).is_empty(), "B counted nothing of it");
    // B's own first sync carries none of A's hits.
    let next = tick(&mut host, &mut n, T0 + 300);
    assert!(next.iter().all(|c| bound_keys(c).is_empty()), "{next:?}");
}

/// One context per node syncs (the lease): another context of the same
/// node syncs only when the holder stopped renewing, and then the old
/// holder does not. Without the lease every worker's context would send
/// each key, a share of its hits each, once per worker.
#[test]
fn one_context_per_node_syncs_and_takes_over_a_lease_run_out() {
    let mut host = MockNodeHost::new(T0);
    let json = fleet(10).replace("address", "route");
    let mut a = node(&mut host, 1, &json);
    let mut b = node(&mut host, 2, &json);
    assert!(!tick(&mut host, &mut a, T0).is_empty());
    assert!(tick(&mut host, &mut b, T0 + 1_000).is_empty());
    assert!(!tick(&mut host, &mut a, T0 + 2_000).is_empty(), "renewed");
    // Three of its syncs, but at least three 1 s ticks: 3 s.
    let lease = 3_000;
    assert!(tick(&mut host, &mut b, T0 + 2_000 + lease - 1).is_empty());
    assert!(
        !tick(&mut host, &mut b, T0 + 2_000 + lease).is_empty(),
        "ran out: taken over"
    );
    assert!(tick(&mut host, &mut a, T0 + 2_001 + lease).is_empty());
}

/// The configuration in force, forgotten by the directory (no tick for a
/// minute: a VM stalled), registers again and counts on; a superseded one
/// forgotten stops counting (its lanes may be another bound's) and says so
/// once. Reached only end to end before (none of it had a test).
#[test]
fn the_directory_forgetting_a_configuration() {
    let mut host = MockNodeHost::new(T0);
    let mut n = node(&mut host, 1, &fleet(10));
    tick(&mut host, &mut n, T0);
    let gen = n.active().unwrap().gen;
    tick(&mut host, &mut n, T0 + directory::LEASE_MS + 1);
    assert_eq!(host.logged(Level::Error, "registering it again"), 1);
    assert!(host.stats_of(0).contains(&NodeStat::StoreError));
    assert_eq!(host.configs(), 2, "registered again");
    let fresh = n.active().unwrap();
    assert!(fresh.gen > gen && !fresh.orphaned.get());
    assert!(n.for_request().is_some());
    tick(&mut host, &mut n, T0 + directory::LEASE_MS + 1_001);
    tick(&mut host, &mut n, T0 + directory::LEASE_MS + 2_001);
    assert_eq!(host.logged(Level::Error, "forgotten"), 1, "known again");

    // Superseded: another context took the newer configuration and ticks;
    // this one stalls for a minute.
    let mut host = MockNodeHost::new(T0);
    let mut old = node(&mut host, 1, &fleet(10));
    let mut new = node(&mut host, 2, &fleet(11));
    tick(&mut host, &mut old, T0);
    let mut now = T0;
    while now <= T0 + directory::LEASE_MS {
        tick(&mut host, &mut new, now);
        now += 1_000;
    }
    let a = old.active().unwrap();
    tick(&mut host, &mut old, now);
    assert!(a.orphaned.get(), "counts nothing more");
    assert_eq!(
        host.logged(Level::Error, "superseded configuration"),
        1,
        "says so at once"
    );
    assert!(
        old.for_request().is_none(),
        "a new request is let through uncounted"
    );
    tick(&mut host, &mut old, now + 1_000);
    tick(&mut host, &mut old, now + 2_000);
    assert_eq!(host.logged(Level::Error, "superseded configuration"), 1);
    assert_eq!(host.configs(), 2, "not registered again");
}

/// A worker's first sign-in must not meet a cold connection that outlasts
/// the request's timeout (a 503): each worker's context calls the
/// service at its ticks, one call at a time, again after a failure (or a
/// call the host could not send), until one is answered.
#[test]
fn warm_up_tries_one_call_at_a_time_until_answered() {
    let mut host = MockNodeHost::new(T0);
    let mut n = node(&mut host, 1, SIGN_IN);
    let first = tick(&mut host, &mut n, T0);
    assert!(first.len() == 1 && first[0].is_warm_up(), "{first:?}");
    assert_eq!(first[0].timeout_ms, warm_up::TIMEOUT_MS);
    assert!(tick(&mut host, &mut n, T0 + 1_000).is_empty(), "in flight");
    assert_eq!(host.fail(&mut n, first[0].token, 14, None), None);
    host.dispatch_error = Some("BadArgument".into());
    assert!(tick(&mut host, &mut n, T0 + 2_000).is_empty(), "not sent");
    host.dispatch_error = None;
    let again = tick(&mut host, &mut n, T0 + 3_000);
    assert_eq!(again.len(), 1, "tried again");
    assert_eq!(host.answer(&mut n, again[0].token, 0, &[]), None);
    for k in 4..10 {
        assert!(tick(&mut host, &mut n, T0 + k * 1_000).is_empty(), "done");
    }
    assert_eq!(host.logged(Level::Warn, "warm-up"), 0);
}

/// While the service is unreachable each try is one call a tick; after
/// `warm_up::TRIES` it gives up (the first sign-in opens the connection)
/// and says so once; a configuration no route of which calls the service
/// never calls (not even to encode a call every tick).
#[test]
fn warm_up_gives_up_after_its_tries_and_says_so_once() {
    let mut host = MockNodeHost::new(T0);
    let mut n = node(&mut host, 1, SIGN_IN);
    let mut now = T0;
    for _ in 0..warm_up::TRIES {
        let calls = tick(&mut host, &mut n, now);
        assert_eq!(calls.len(), 1);
        host.fail(&mut n, calls[0].token, 14, None);
        now += 1_000;
    }
    assert_eq!(
        host.logged(Level::Warn, "answered no warm-up call in 30"),
        1
    );
    for _ in 0..3 {
        assert!(tick(&mut host, &mut n, now).is_empty(), "given up");
        now += 1_000;
    }
    let mut host = MockNodeHost::new(T0);
    let json = r#"{"instance": "n", "routes": [{"name": "r", "bounds": [
        {"name": "a", "per": "address", "limit": 5, "window": "PT1M"}]}]}"#;
    let mut quiet = node(&mut host, 1, json);
    for k in 0..3 {
        assert!(tick(&mut host, &mut quiet, T0 + k * 1_000).is_empty());
    }
}

/// Tiers on one key share one caller table: each tier's `tracked` gauge
/// says its callers (issue 41).
#[test]
fn every_tier_of_a_shared_lane_reports_its_tracked_callers() {
    let table = Table {
        buckets: 16,
        per_bucket: 4,
        cap: 32,
    };
    let mut host = MockNodeHost::new(T0);
    let mut n = RootState::new(1, table);
    let json = r#"{"instance": "n", "routes": [{"name": "r", "bounds": [
        {"name": "s", "per": "address", "limit": 5, "window": "PT1S"},
        {"name": "m", "per": "address", "limit": 50, "window": "PT1M"}]}]}"#;
    assert!(n.configure(&mut host, json.as_bytes().to_vec()));
    let a = n.active().unwrap();
    for i in 0..3 {
        assert!(hit(&mut host, &a, &format!("10.0.0.{i}")));
    }
    tick(&mut host, &mut n, T0);
    let mut by_bound: Vec<(usize, u32)> = host
        .stats_of(0)
        .iter()
        .filter_map(|s| match s {
            NodeStat::Tracked { bound, n, .. } => Some((bound.index(), *n)),
            _ => None,
        })
        .collect();
    by_bound.sort();
    by_bound.dedup();
    assert_eq!(by_bound, [(0, 3), (1, 3)]);
}

/// The sweep goes through a caller table a chunk of buckets a second
/// (`SWEEP_CHUNK`): expired callers leave the tracked gauge chunk by chunk,
/// all of them in one turn of the chunks (a whole table each second would
/// be thousands of host calls a tick in every VM; no sweep, a table that
/// fills with callers long gone).
#[test]
fn the_sweep_goes_through_a_table_in_chunks() {
    let table = Table {
        buckets: 4 * super::sweep::SWEEP_CHUNK,
        per_bucket: 4,
        cap: 4_096,
    };
    let mut host = MockNodeHost::new(T0);
    let mut n = RootState::new(1, table);
    let json = r#"{"instance": "n", "routes": [{"name": "r", "bounds": [
        {"name": "a", "per": "address", "limit": 5, "window": "PT1S"}]}]}"#;
    assert!(n.configure(&mut host, json.as_bytes().to_vec()));
    let a = n.active().unwrap();
    for i in 0..200 {
        assert!(hit(&mut host, &a, &format!("10.0.{}.{}", i / 100, i % 100)));
    }
    let tracked = |host: &MockNodeHost| {
        host.stats_of(0).iter().rev().find_map(|s| match s {
            NodeStat::Tracked { n, .. } => Some(*n),
            _ => None,
        })
    };
    tick(&mut host, &mut n, T0);
    assert_eq!(tracked(&host), Some(200), "not expired yet");
    // Expired two windows later: one chunk a second.
    let mut seen = Vec::new();
    for k in 2..6 {
        tick(&mut host, &mut n, T0 + k * 1_000);
        seen.extend(tracked(&host));
    }
    assert!(seen[0] > 0 && seen[0] < 200, "one chunk first: {seen:?}");
    assert!(seen.windows(2).all(|w| w[1] <= w[0]), "{seen:?}");
    assert_eq!(seen[3], 0, "every chunk in one turn: {seen:?}");
    // Idle (nobody tracked), a tick reads the tracked count, not a chunk.
    let reads = host.pipe.store.reads();
    tick(&mut host, &mut n, T0 + 7_000);
    let read = host.pipe.store.reads() - reads;
    assert!(read < 8, "{read} reads for an idle table");
}

/// A sync whose context went away (a reload destroyed it, its call never
/// ended) holds its keys as in flight; the context that takes over the
/// lease syncs them again once `fleet::LOST_MS` passed, their hits held as
/// possibly counted: a read first, the hits again once it is answered (not
/// at every sync while the service does not answer). Without it, a key
/// whose sync was lost with its context was never synced again: its node
/// decided alone.
#[test]
fn a_sync_whose_context_went_away_is_given_up_after_its_time() {
    let mut host = MockNodeHost::new(T0);
    let json = fleet(300);
    let mut gone = node(&mut host, 1, &json);
    let mut next = node(&mut host, 2, &json);
    let a = gone.active().unwrap();
    assert_eq!(hits(&mut host, &a, "10.0.0.3", 3), 3);
    let lost = tick(&mut host, &mut gone, T0);
    assert_eq!(lost.iter().map(bound_keys).collect::<Vec<_>>(), [vec![3]]);
    tick(&mut host, &mut next, T0);
    gone.done(&mut host);
    drop(gone);
    let mut synced = Vec::new();
    let mut now = T0 + 1_000;
    while now <= T0 + crate::count::fleet::LOST_MS + 1_000 {
        let calls = tick(&mut host, &mut next, now);
        let keys: Vec<u64> = calls.iter().flat_map(bound_keys).collect();
        synced.push((now - T0, !calls.is_empty(), keys));
        for c in &calls {
            host.answer(&mut next, c.token, 0, &answer_to(c, 0));
        }
        now += 1_000;
    }
    let lease = fleet_sync::lease_ms(200);
    // Until the lease runs out, nothing; then the heartbeat alone while
    // the key is in flight; once lost, the key read, then its 3 again.
    for (at, called, keys) in &synced {
        assert_eq!(*called, *at >= lease, "{synced:?}");
        let lost = *at >= crate::count::fleet::LOST_MS;
        let want: &[u64] = match *at {
            at if at > crate::count::fleet::LOST_MS => &[3],
            _ if lost => &[0],
            _ => &[],
        };
        assert!(!lost || *called);
        if *called {
            assert_eq!(keys.as_slice(), want, "at {at}: {synced:?}");
        }
    }
}

/// A sync call the host would not send (no cluster yet, a full queue)
/// never reached the service: settled as not counted at once, its hits go
/// with the next sync, and the failure is said once until a sync is
/// answered (taken as possibly counted, they would never be sent).
#[test]
fn a_sync_the_host_would_not_send_sends_its_hits_with_the_next() {
    let mut host = MockNodeHost::new(T0);
    let mut n = node(&mut host, 1, &fleet(300));
    let a = n.active().unwrap();
    assert_eq!(hits(&mut host, &a, "10.0.0.4", 2), 2);
    host.dispatch_error = Some("BadArgument".into());
    assert!(tick(&mut host, &mut n, T0).is_empty());
    assert!(tick(&mut host, &mut n, T0 + 200).is_empty());
    assert!(host.stats_of(0).contains(&NodeStat::FleetSyncFailed));
    assert_eq!(host.logged(Level::Warn, "fleet sync failed"), 1, "once");
    host.dispatch_error = None;
    let sent = tick(&mut host, &mut n, T0 + 400);
    assert_eq!(sent.iter().map(bound_keys).collect::<Vec<_>>(), [vec![2]]);
    host.answer(&mut n, sent[0].token, 0, &answer_to(&sent[0], 0));
    assert_eq!(host.logged(Level::Info, "fleet sync answered again"), 1);
}

/// Tokens the rate-limit service counts, 100 reserved at admission.
const TOKENS: &str = r#"{"instance":"llm",
    "rate_limit_service":{"cluster":"rls","domain":"llm"},
    "routes":[{"name":"chat","bounds":[
      {"name":"tokens","per":"address","scope":"installation","shape":"fixed","limit":1000,"window":"PT1M",
       "cost":{"response_json":"/usage/total_tokens","reserve":100}}]}]}"#;

/// The hits a call sends per descriptor.
fn addends(call: &Call) -> Vec<u64> {
    let req = proto::RateLimitRequest::decode(call.message.as_slice()).unwrap();
    req.descriptors
        .iter()
        .map(|d| d.hits_addend.as_ref().map_or(1, |h| h.value))
        .collect()
}

/// An installation bound's cost beyond its reservation is sent by the root
/// context at its next tick (a request's own call would die with it); a
/// call the host would not send goes at the next tick, one the service
/// failed is counted as unsent and not sent again (it may have counted).
#[test]
fn costs_owed_to_the_service_are_sent_at_the_next_tick() {
    let mut host = MockNodeHost::new(T0);
    let mut n = node(&mut host, 1, TOKENS);
    let active = n.active().unwrap();
    let ok = proto::RateLimitResponse {
        overall_code: 1,
        statuses: vec![proto::DescriptorStatus {
            code: 1,
            limit_remaining: 900,
            current_limit: Some(proto::RateLimit {
                requests_per_unit: 1000,
                unit: 2,
                name: String::new(),
            }),
            duration_until_reset: None,
        }],
    };
    host.pipe.service_answer = Some((0, ok.encode_to_vec()));
    let chat = |host: &mut MockNodeHost, tokens: u32| {
        host.pipe.upstream_body =
            vec![format!(r#"{{"usage":{{"total_tokens":{tokens}}}}}"#).into()];
        hit(host, &active, "10.0.0.1")
    };
    assert!(chat(&mut host, 400));
    assert!(chat(&mut host, 250));
    let calls = tick(&mut host, &mut n, T0 + 1_000);
    let owed: Vec<&Call> = calls.iter().filter(|c| !c.is_warm_up()).collect();
    assert_eq!(owed.len(), 1, "{calls:?}");
    assert_eq!(addends(owed[0]), [300, 150]);
    assert!(host.answer(&mut n, owed[0].token, 0, &[]).is_none());
    assert!(tick(&mut host, &mut n, T0 + 2_000)
        .iter()
        .all(Call::is_warm_up));

    assert!(chat(&mut host, 700));
    host.dispatch_error = Some("BadArgument".into());
    tick(&mut host, &mut n, T0 + 3_000);
    host.dispatch_error = None;
    let again: Vec<Call> = tick(&mut host, &mut n, T0 + 4_000)
        .into_iter()
        .filter(|c| !c.is_warm_up())
        .collect();
    assert_eq!(addends(&again[0]), [600], "sent at the next tick");
    host.fail(&mut n, again[0].token, 14, None);
    assert!(host.stats_of(0).contains(&NodeStat::CostsUnsent(1)));
    assert!(tick(&mut host, &mut n, T0 + 5_000)
        .iter()
        .all(Call::is_warm_up));
}

/// Stats of one kind (`pick`) that configuration `config` counted, in order.
fn counted<T>(host: &MockNodeHost, config: usize, pick: impl Fn(NodeStat) -> Option<T>) -> Vec<T> {
    host.stats_of(config).into_iter().filter_map(pick).collect()
}

/// `fleet_alone` says how many fleet decisions were made without a fresh
/// answer from the service since the last housekeeping, then starts over.
#[test]
fn fleet_alone_counts_the_decisions_made_alone_since_the_last_housekeeping() {
    let mut host = MockNodeHost::new(T0);
    let mut n = node(&mut host, 1, &fleet(300));
    let a = n.active().unwrap();
    // Never answered: a new key is decided alone, admitted or not.
    assert_eq!(hits(&mut host, &a, "10.0.0.5", 4), 4);
    tick(&mut host, &mut n, T0);
    tick(&mut host, &mut n, T0 + 1_000);
    let alone = counted(&host, 0, |s| match s {
        NodeStat::FleetAlone(k) => Some(k),
        _ => None,
    });
    assert_eq!(alone, [4, 0]);
}

/// `write_memory` says how many decisions a worker's memory of its own
/// writes saved a read for, and how many of its guesses another worker's
/// write had made stale, since the last housekeeping.
#[test]
fn write_memory_counts_reads_saved_and_guesses_gone_stale() {
    let json = r#"{"instance": "w", "routes": [{"name": "r", "bounds": [
        {"name": "a", "per": "address", "limit": 100, "window": "PT1M"}]}]}"#;
    let mut host = MockNodeHost::new(T0);
    let mut mine = node(&mut host, 1, json);
    let other = node(&mut host, 3, json);
    let (a, b) = (mine.active().unwrap(), other.active().unwrap());
    // The first admission reads; the next ones are written from memory.
    assert_eq!(hits(&mut host, &a, "10.0.0.7", 5), 5);
    tick(&mut host, &mut mine, T0);
    // Another worker writes the caller: this worker's next guess is stale.
    assert!(hit(&mut host, &b, "10.0.0.7"));
    assert!(hit(&mut host, &a, "10.0.0.7"));
    tick(&mut host, &mut mine, T0 + 1_000);
    tick(&mut host, &mut mine, T0 + 2_000);
    let memory = counted(&host, 0, |s| match s {
        NodeStat::WriteMemory(saved, stale) => Some((saved, stale)),
        _ => None,
    });
    assert_eq!(memory, [(4, 0), (0, 1), (0, 0)]);
}

/// Two instances in one Envoy (two configurations with fleet bounds over
/// one shared data) keep their fleet records apart: each one's context
/// holds its own lease and syncs at every period.
#[test]
fn two_instances_in_one_envoy_each_sync_their_own_fleet() {
    let mut host = MockNodeHost::new(T0);
    let mut api = node(&mut host, 1, &fleet(300));
    let web = fleet(300).replace(r#""instance":"api""#, r#""instance":"web""#);
    let mut web = node(&mut host, 3, &web);
    for k in 0..5 {
        let now = T0 + k * 200;
        for n in [&mut api, &mut web] {
            let calls = tick(&mut host, n, now);
            assert!(!calls.is_empty(), "at {now}");
            for c in &calls {
                host.answer(n, c.token, 0, &answer_to(c, 0));
            }
        }
    }
}

/// A configuration refused for the vm_id's budget says why in Envoy's log:
/// here, the configurations alive already, and what to do about it.
#[test]
fn a_configuration_over_the_budget_is_refused_saying_why() {
    let mut host = MockNodeHost::new(T0);
    let alive = crate::count::budget::LIVE_CONFIGURATIONS;
    let mut nodes = Vec::new();
    for k in 0..=alive {
        let json = format!(
            r#"{{"instance": "i{k}", "routes": [{{"name": "r", "bounds": [
                {{"name": "a", "per": "route", "limit": 5, "window": "PT1S"}}]}}]}}"#
        );
        let mut n = RootState::new(1, SMALL);
        let ok = n.configure(&mut host, json.into_bytes());
        assert_eq!(ok, k < alive, "configuration {k}");
        nodes.push(n);
    }
    let said = format!("{alive} configurations are alive in this vm_id already");
    assert_eq!(
        host.logged(Level::Error, &said),
        1,
        "{:?}",
        host.logs.last()
    );
    assert_eq!(host.logged(Level::Error, "--drain-time-s"), 1);
}

/// A full queue drops what comes after, and says how many at the next
/// tick; the tick sends the whole queue, a call per batch.
#[test]
fn a_full_owed_queue_counts_what_it_dropped_and_a_tick_sends_it_all() {
    use crate::pipeline::owed::{Charge, CHARGES_PER_CALL, OWED_MAX};
    let mut host = MockNodeHost::new(T0);
    let mut n = node(&mut host, 1, TOKENS);
    let charge = Charge {
        descriptor: "chat.tokens".into(),
        caller: Some(("address", "n0".into())),
        limit: crate::rls::Override {
            requests_per_unit: 1000,
            unit: crate::config::Unit::Minute,
        },
        at: crate::pipeline::owed::ChargeAt::Window,
        units: 5,
    };
    for _ in 0..OWED_MAX + 2 {
        n.owed.borrow_mut().push(charge.clone());
    }
    let owed: Vec<Call> = tick(&mut host, &mut n, T0 + 1_000)
        .into_iter()
        .filter(|c| !c.is_warm_up())
        .collect();
    assert_eq!(owed.len(), OWED_MAX / CHARGES_PER_CALL);
    assert!(owed.iter().all(|c| addends(c) == [5; CHARGES_PER_CALL]));
    assert!(host.stats_of(0).contains(&NodeStat::CostsUnsent(2)));
    assert!(n.owed.borrow().is_empty());
}

/// How often a node wakes: a fleet configuration ticks at its `sync_ms`
/// (200 ms here) and syncs each tick; the housekeeping (the stats flush,
/// the sweep) runs once a second all the same, and a 1 s tick that comes a
/// little early still runs it. (Mutants: the tick period's fleet arm, the
/// housekeeping's once-a-second guard.)
#[test]
fn a_fleet_node_syncs_each_sync_ms_and_keeps_house_once_a_second() {
    let flushes = |host: &MockNodeHost| {
        host.stats_of(0)
            .iter()
            .filter(|s| matches!(s, NodeStat::Flush))
            .count()
    };
    let mut host = MockNodeHost::new(T0);
    let mut n = node(&mut host, 1, &fleet(300));
    assert_eq!(host.tick_ms, Some(200), "a fleet ticks at its sync_ms");
    let mut synced = 0;
    for k in 0..10u64 {
        synced += tick(&mut host, &mut n, T0 + k * 200).len();
    }
    assert_eq!(synced, 10, "one sync call a tick");
    // Ticks over 1,800 ms: housekeeping at 0, 1,000 (not on the 8 ticks
    // between).
    assert_eq!(flushes(&host), 2);
    // Ticks twice as often as sync_ms (a host that ticks early and often):
    // a sync every other one.
    let synced: usize = (0..10u64)
        .map(|k| tick(&mut host, &mut n, T0 + 2_000 + k * 100).len())
        .sum();
    assert_eq!(synced, 5);
    // Without fleet bounds: a tick a second, each one housekeeping, even 50
    // ms early (the host's timer is not exact).
    let mut host = MockNodeHost::new(T0);
    let mut n = node(&mut host, 1, SIGN_IN);
    assert_eq!(host.tick_ms, Some(1_000));
    for k in 0..5u64 {
        tick(&mut host, &mut n, T0 + k * 950);
    }
    assert_eq!(flushes(&host), 5);
    // Twice within the second: once.
    tick(&mut host, &mut n, T0 + 4 * 950 + 500);
    assert_eq!(flushes(&host), 5);
}

/// A configuration's entry in the lane directory: each root context joins
/// it at its first tick, once; it stays while one of them is alive; when
/// the last is done, the entry (and its lanes) is freed. A context that
/// never ticked never joined, and its end takes nothing from the others.
/// (Mutants: `done`, `leave` and its guard, the tick's join flag.)
#[test]
fn contexts_join_the_directory_once_and_the_last_one_done_frees_it() {
    use crate::count::directory::{Directory, DIRECTORY_KEY};
    use crate::count::store::Store;
    let live = |host: &MockNodeHost| -> Vec<(u64, u32)> {
        let (v, _) = Store::get(&host.pipe.store, DIRECTORY_KEY).unwrap();
        let dir = Directory::decode(&v.unwrap()).unwrap();
        dir.live.iter().map(|l| (l.gen, l.refs)).collect()
    };
    let mut host = MockNodeHost::new(T0);
    // Two workers' root contexts with the same configuration: one entry.
    let mut a = node(&mut host, 1, &fleet(10));
    let mut b = node(&mut host, 2, &fleet(10));
    let gen = a.active().unwrap().gen;
    assert_eq!(b.active().unwrap().gen, gen);
    assert_eq!(live(&host), vec![(gen, 0)], "registered, not joined");
    for k in 0..5 {
        tick(&mut host, &mut a, T0 + k * 1_000);
        tick(&mut host, &mut b, T0 + k * 1_000);
    }
    assert_eq!(live(&host), vec![(gen, 2)], "each joined once");
    a.done(&mut host);
    a.done(&mut host);
    assert_eq!(live(&host), vec![(gen, 1)], "left once");
    // A third context that never ticked: its end leaves b's count alone.
    let mut c = node(&mut host, 3, &fleet(10));
    c.done(&mut host);
    assert_eq!(live(&host), vec![(gen, 1)]);
    b.done(&mut host);
    assert_eq!(live(&host), vec![], "the last one gone: freed");
}

/// The first context to put a configuration in force logs its warnings
/// (what `ratebound check` would say), once, at Warn; notes are not logged.
/// Here: fleet bounds without `fleet_nodes`.
#[test]
fn a_configuration_s_warnings_are_logged_once() {
    let json = fleet(10).replace(r#","fleet_nodes":3"#, "");
    let mut host = MockNodeHost::new(T0);
    let _a = node(&mut host, 1, &json);
    let _b = node(&mut host, 2, &json);
    assert_eq!(
        host.logged(Level::Warn, "configuration warning: warning[fleet-nodes]"),
        1
    );
    assert_eq!(host.logged(Level::Warn, "note["), 0);
    // A configuration without warnings: nothing at Warn.
    let plain = r#"{"instance":"p","routes":[{"name":"r","bounds":[
        {"name":"a","per":"address","limit":5,"window":"PT1M"}]}]}"#;
    let mut host = MockNodeHost::new(T0);
    let _c = node(&mut host, 1, plain);
    let warned: Vec<_> = host
        .logs
        .iter()
        .filter(|(l, _)| *l == Level::Warn)
        .collect();
    assert_eq!(warned.len(), 0, "{warned:?}");
}

/// The heartbeat's own key names the node by Envoy's node id; an empty id,
/// or one over 256 bytes (a key that long in every call), is not used: the
/// run's own id stands in.
#[test]
fn the_own_key_is_the_node_id_when_it_is_a_usable_one() {
    let own = |id: &str| -> String {
        let mut host = MockNodeHost::new(T0);
        host.pipe
            .properties
            .insert("node.id".into(), id.as_bytes().to_vec());
        let mut n = node(&mut host, 7, &fleet(10));
        let calls = tick(&mut host, &mut n, T0);
        let req = proto::RateLimitRequest::decode(calls[0].message.as_slice()).unwrap();
        let d = req
            .descriptors
            .iter()
            .find(|d| d.entries[0].value == "node")
            .unwrap();
        d.entries[2].value.clone()
    };
    assert_eq!(own("gw-1.istio-system"), "gw-1.istio-system");
    assert_eq!(own(&"x".repeat(256)), "x".repeat(256));
    assert!(own(&"x".repeat(257)).starts_with("run-"));
    assert!(own("").starts_with("run-"));
}

/// A fleet sync that keeps failing says so once (not once a sync), and
/// once again when the service answers; a new run of failures says so
/// again.
#[test]
fn a_failing_sync_is_logged_once_a_run_of_failures() {
    let mut host = MockNodeHost::new(T0);
    let mut n = node(&mut host, 1, &fleet(10));
    let failing = |host: &MockNodeHost| host.logged(Level::Warn, "fleet sync failed");
    let mut now = T0;
    let mut sync = |host: &mut MockNodeHost, n: &mut RootState<MockStats>, ok: bool| {
        let calls = tick(host, n, now);
        now += 200;
        for c in calls {
            if ok {
                host.answer(n, c.token, 0, &answer_to(&c, 0));
            } else {
                host.fail(n, c.token, 14, Some("no healthy upstream"));
            }
        }
    };
    for _ in 0..3 {
        sync(&mut host, &mut n, false);
    }
    assert_eq!(failing(&host), 1);
    sync(&mut host, &mut n, true);
    sync(&mut host, &mut n, true);
    assert_eq!(host.logged(Level::Info, "fleet sync answered again"), 1);
    sync(&mut host, &mut n, false);
    sync(&mut host, &mut n, false);
    assert_eq!(failing(&host), 2);
}

/// The first VM to bind a new caller table creates every key of it; every
/// later VM binding the same table reads only the key whose presence says
/// the rest exist, and writes none.
#[test]
fn a_caller_table_is_created_once_and_later_vms_read_one_key() {
    let json = r#"{"routes":[{"name":"api","bounds":[
        {"name":"addr","per":"address","limit":5,"window":"PT1M"}]}]}"#;
    let mut host = MockNodeHost::new(T0);
    let writes = host.pipe.store.writes();
    let first = node(&mut host, 1, json);
    let active = first.active().unwrap();
    let lane = active
        .limiter
        .lane(
            crate::config::plan::RouteId(0),
            crate::config::plan::BoundId(0),
        )
        .unwrap();
    let keys: Vec<String> = lane.all_keys().collect();
    for k in &keys {
        let v = crate::count::store::Store::get(&host.pipe.store, k).unwrap();
        assert!(v.0.is_some(), "{k} created");
    }
    let lane_writes = host.pipe.store.writes() - writes;
    assert!(lane_writes >= keys.len(), "{lane_writes} writes");
    let (reads, writes) = (host.pipe.store.reads(), host.pipe.store.writes());
    let _second = node(&mut host, 2, json);
    // The directory's entry read, then the lane's last key: nothing written.
    assert_eq!(host.pipe.store.reads() - reads, 2, "{} keys", keys.len());
    assert_eq!(host.pipe.store.writes() - writes, 0);
}

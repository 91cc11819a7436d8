//! Fleet bounds through the whole pipeline, natively: several nodes (each
//! a root context, [`RootState`](crate::node::RootState), over its own store), their fleet syncs
//! (the node's driver, with its calls in flight) and a service that counts
//! as envoyproxy/ratelimit does (fixed clock windows, every hit added, the
//! override's limit answered).
#![cfg(test)]
#![allow(clippy::indexing_slicing)]

use crate::node::fleet_sync::{Settled, MAX_DESCRIPTORS, MAX_SYNC_KEYS};
use crate::node::mock::{MockNodeHost, MockStats};
use crate::node::{Active, NodeStat};
use crate::pipeline::mock::{request, SMALL};
use crate::rls::proto;
use prost::Message;
use std::collections::HashMap;
use std::rc::Rc;

const T0: u64 = 600_000;

fn config(limit: u32, per: &str) -> String {
    format!(
        r#"{{"instance":"api",
        "rate_limit_service":{{"cluster":"rls","domain":"api","sync_ms":200,"fleet_nodes":3}},
        "routes":[{{"name":"api","bounds":[
          {{"name":"fleet","per":"{per}","limit":{limit},"window":"PT1M","scope":"fleet"}}]}}]}}"#
    )
}

/// envoyproxy/ratelimit in miniature: a count per descriptor and clock
/// window of its unit, every call's hits added.
#[derive(Default)]
struct Service {
    counts: HashMap<(String, u64), u64>,
    /// Hits added to bounds' keys (not the heartbeat), and descriptors per
    /// call.
    added: u64,
    calls: Vec<usize>,
    down: bool,
    /// Counts every call, then times out (a service too slow for its sync).
    slow: bool,
    /// Hits added to bounds' keys by calls that then timed out (`slow`).
    added_slow: u64,
    /// Every call times out and counts nothing (a Redis failover: the
    /// service waits on Redis past the sync's timeout).
    stuck: bool,
    /// A key's count when first seen, by its bound's descriptor value:
    /// what other nodes counted.
    elsewhere: HashMap<String, u64>,
}

impl Service {
    /// The answer to a call at `now`: gRPC status and message.
    fn answer(&mut self, message: &[u8], now: u64) -> (u32, Vec<u8>) {
        if self.down {
            return (14, Vec::new());
        }
        if self.stuck {
            return (crate::rls::GrpcCode::DeadlineExceeded.number(), Vec::new());
        }
        let req = proto::RateLimitRequest::decode(message).unwrap();
        self.calls.push(req.descriptors.len());
        let statuses = req
            .descriptors
            .iter()
            .map(|d| {
                let limit = d.limit.clone().unwrap();
                let unit_ms = [0, 1_000, 60_000, 3_600_000, 86_400_000][limit.unit as usize];
                let key: Vec<String> = d
                    .entries
                    .iter()
                    .map(|e| format!("{}={}", e.key, e.value))
                    .collect();
                let hits = d.hits_addend.clone().unwrap().value;
                if d.entries[0].key == "bound" {
                    self.added += hits;
                    if self.slow {
                        self.added_slow += hits;
                    }
                }
                let before = self.elsewhere.get(&d.entries[0].value).copied();
                let n = self
                    .counts
                    .entry((key.join(","), now / unit_ms))
                    .or_insert(before.unwrap_or_default());
                *n += hits;
                let over = *n > u64::from(limit.requests_per_unit);
                proto::DescriptorStatus {
                    code: if over { 2 } else { 1 },
                    current_limit: Some(proto::RateLimit {
                        requests_per_unit: limit.requests_per_unit,
                        unit: limit.unit,
                        name: String::new(),
                    }),
                    limit_remaining: u32::try_from(
                        u64::from(limit.requests_per_unit).saturating_sub(*n),
                    )
                    .unwrap(),
                    duration_until_reset: None,
                }
            })
            .collect();
        let answer = proto::RateLimitResponse {
            overall_code: 1,
            statuses,
        };
        if self.slow {
            // Counted, but the answer comes too late: the host's timeout.
            return (crate::rls::GrpcCode::DeadlineExceeded.number(), Vec::new());
        }
        (0, answer.encode_to_vec())
    }
}

/// What Envoy answers for a call to a service that is down: it never
/// reached it (counted nothing).
const UNREACHED: &str = "no healthy upstream";

struct Node {
    host: MockNodeHost,
    node: crate::node::RootState<MockStats>,
}

impl Node {
    fn new(json: &str, me: u64) -> Node {
        Node::with_table(json, me, SMALL)
    }

    fn with_table(json: &str, me: u64, table: crate::count::lane::Table) -> Node {
        let mut host = MockNodeHost::new(T0);
        // Its stable node id (the heartbeat's own key).
        let id = format!("node-{me}").into_bytes();
        host.pipe.properties.insert("node.id".into(), id);
        let mut node = crate::node::RootState::new(me, table);
        assert!(node.configure(&mut host, json.as_bytes().to_vec()));
        Node { host, node }
    }

    /// The configuration in force.
    fn active(&self) -> Rc<Active<MockStats>> {
        self.node.active().unwrap()
    }

    /// One request from `address`: admitted?
    fn hit(&mut self, address: &str, now: u64) -> bool {
        let active = self.active();
        let pipe = &mut self.host.pipe;
        pipe.now = now;
        pipe.request_headers.clear();
        pipe.replies.clear();
        pipe.properties.insert(
            "source.address".into(),
            format!("{address}:5000").into_bytes(),
        );
        request(active.worker(), pipe);
        pipe.replies.is_empty()
    }

    /// One sync with `service`, answered at once; the calls it made.
    fn sync(&mut self, service: &mut Service, now: u64) -> Vec<Settled> {
        self.host.pipe.now = now;
        self.node.sync(&mut self.host);
        let calls = self.host.take_calls();
        self.host.pipe.now = now + 2;
        let settled = calls
            .iter()
            .map(|c| {
                let (status, body) = service.answer(&c.message, now);
                match status {
                    0 => self.host.answer(&mut self.node, c.token, 0, &body),
                    14 => self.host.fail(&mut self.node, c.token, 14, Some(UNREACHED)),
                    s => self.host.fail(&mut self.node, c.token, s, None),
                }
                .unwrap()
            })
            .collect();
        // Neither the take nor the answers met a store error.
        let stats = self.host.stats_of(0);
        assert!(!stats.contains(&NodeStat::StoreError), "{stats:?}");
        settled
    }
}

fn fleet(n: u64, json: &str) -> Vec<Node> {
    (0..n).map(|i| Node::new(json, 100 + i)).collect()
}

/// Syncs every node `rounds` times, 200 ms apart from `from`: three rounds
/// count the nodes (own key asked, 1 added, count read).
fn sync_all(nodes: &mut [Node], service: &mut Service, from: u64, rounds: u64) {
    for k in 0..rounds {
        for n in nodes.iter_mut() {
            n.sync(service, from + k * 200);
        }
    }
}

/// The nodes this node's record knows.
fn known_nodes(n: &Node, now: u64) -> Option<u32> {
    let key = n
        .active()
        .limiter
        .fleet
        .as_ref()
        .unwrap()
        .record_key
        .clone();
    let v = crate::count::store::Store::get(&n.host.pipe.store, &key)
        .unwrap()
        .0;
    crate::count::fleet::Record::decode(&v?).and_then(|r| r.nodes(now))
}

/// `k` requests from `address` to node `i` at `now`, no sync between them.
fn burst(nodes: &mut [Node], i: usize, address: &str, k: u32, now: u64) -> u32 {
    (0..k)
        .map(|j| u32::from(nodes[i].hit(address, now + u64::from(j % 5))))
        .sum()
}

/// Sends `per_node` requests from `address` to every node over `span_ms`
/// from `start`, syncing every 200 ms; admitted per node.
fn run(
    nodes: &mut [Node],
    service: &mut Service,
    address: &str,
    per_node: u64,
    start: u64,
    span_ms: u64,
) -> Vec<u64> {
    let mut admitted = vec![0; nodes.len()];
    let mut next_sync = start;
    for k in 0..per_node {
        let now = start + k * span_ms / per_node;
        while next_sync <= now {
            for n in nodes.iter_mut() {
                n.sync(service, next_sync);
            }
            next_sync += 200;
        }
        for (i, n) in nodes.iter_mut().enumerate() {
            if n.hit(address, now + i as u64) {
                admitted[i] += 1;
            }
        }
    }
    admitted
}

#[test]
fn three_nodes_share_one_budget_not_three() {
    let mut nodes = fleet(3, &config(300, "address"));
    let mut service = Service::default();
    // 1,200 requests a node in 20 s: 12 × the fleet's budget.
    let admitted = run(&mut nodes, &mut service, "10.0.0.1", 1_200, T0, 20_000);
    let total: u64 = admitted.iter().sum();
    assert!((300..=330).contains(&total), "{admitted:?}");
    // Refused requests are never sent: the service saw what was admitted.
    assert!(service.added <= total, "{} > {total}", service.added);
    assert!(service.calls.iter().all(|&n| n <= MAX_DESCRIPTORS));
}

/// One request a node, a second of syncs, then 400 a node at once right
/// after a sync. Each node admits its share of what the fleet had left at
/// its last answer, (300 − 3) / 3: 300 in all (the estimate alone lets
/// each node take all 297 left: 894).
#[test]
fn a_synchronised_burst_right_after_a_sync_admits_what_the_fleet_had_left() {
    let mut nodes = fleet(3, &config(300, "address"));
    let mut service = Service::default();
    sync_all(&mut nodes, &mut service, T0, 3);
    let a = "10.0.2.1";
    let mut admitted: u32 = (0..3).map(|i| burst(&mut nodes, i, a, 1, T0 + 700)).sum();
    sync_all(&mut nodes, &mut service, T0 + 800, 5);
    let now = T0 + 1_801;
    admitted += (0..3)
        .map(|i| burst(&mut nodes, i, a, 400, now))
        .sum::<u32>();
    assert!(admitted <= 300 + 3, "{admitted}");
    // And the syncs after it keep the fleet within its budget.
    sync_all(&mut nodes, &mut service, now + 100, 1);
    admitted += (0..3)
        .map(|i| burst(&mut nodes, i, a, 400, now + 150))
        .sum::<u32>();
    assert!(admitted <= 300 + 3, "{admitted}");
    assert!(admitted >= 297, "{admitted}");
    // A refusal for the share says to come back after a sync.
    let last = nodes[0].host.pipe.replies.last().unwrap();
    assert!(last.status == 429, "{last:?}");
}

/// The budget used on one node, then fast bursts on the two
/// others, new to the key: each admits a tenth of its share (10)
/// before its first answer, not its alone share (100 each: 500 in all).
#[test]
fn a_node_new_to_a_key_waits_for_its_first_answer_before_taking_a_share() {
    let mut nodes = fleet(3, &config(300, "address"));
    let mut service = Service::default();
    sync_all(&mut nodes, &mut service, T0, 3);
    let a = "10.0.2.2";
    let mut admitted = 0;
    let mut now = T0 + 600;
    for _ in 0..60 {
        now += 100;
        if now.is_multiple_of(200) {
            sync_all(&mut nodes, &mut service, now, 1);
        }
        admitted += burst(&mut nodes, 0, a, 10, now);
    }
    // One node with all the load takes a share of each answer's remainder:
    // it reaches the budget, a little more slowly.
    assert!((290..=300).contains(&admitted), "{admitted}");
    sync_all(&mut nodes, &mut service, now + 100, 1);
    let others: u32 = (1..3)
        .map(|i| burst(&mut nodes, i, a, 200, now + 150))
        .sum();
    assert!(admitted + others <= 300 + 2 * 10, "{admitted} + {others}");
    // After their first answer they see the fleet full.
    sync_all(&mut nodes, &mut service, now + 200, 1);
    let after: u32 = (1..3)
        .map(|i| burst(&mut nodes, i, a, 200, now + 250))
        .sum();
    assert_eq!(after, 0);
}

/// The service down for over two clock minutes: each node keeps the node
/// count it last heard (3), and a new address gets 100 a node (falling
/// back to fleet_nodes, here 1, would admit 900 in all).
#[test]
fn a_long_outage_keeps_the_node_count() {
    let json = config(300, "address").replace(r#","fleet_nodes":3"#, "");
    let mut nodes = fleet(3, &json);
    let mut service = Service::default();
    sync_all(&mut nodes, &mut service, T0, 3);
    assert_eq!(known_nodes(&nodes[0], T0 + 600), Some(3));
    service.down = true;
    let mut now = T0 + 600;
    while now < T0 + 150_000 {
        sync_all(&mut nodes, &mut service, now, 1);
        now += 5_000;
    }
    for n in &nodes {
        assert_eq!(known_nodes(n, now), Some(3), "kept, not the guess of 1");
    }
    let admitted: Vec<u64> = run(&mut nodes, &mut service, "10.0.2.3", 400, now, 4_000);
    assert_eq!(admitted, vec![100, 100, 100]);
}

/// A node restarted (its shared data gone) three times in a minute: the
/// heartbeat's own key says it was already counted (3 nodes, not 6), and
/// each run admits its join share before its first answer says the fleet
/// is full (not a fresh alone share each restart).
#[test]
fn a_restart_is_neither_a_new_node_nor_a_fresh_share() {
    let json = config(300, "address");
    let mut nodes = fleet(3, &json);
    let mut service = Service::default();
    sync_all(&mut nodes, &mut service, T0, 3);
    let a = "10.0.2.4";
    let mut admitted = 0;
    let mut now = T0 + 600;
    // The budget used, on all three.
    for _ in 0..40 {
        now += 100;
        if now.is_multiple_of(200) {
            sync_all(&mut nodes, &mut service, now, 1);
        }
        admitted += (0..3).map(|i| burst(&mut nodes, i, a, 3, now)).sum::<u32>();
    }
    let used = admitted;
    // 30 a second a node, 200 ms syncs: the stated error is 24.
    assert!((300..=324).contains(&used), "{used}");
    for k in 0..3 {
        nodes[2] = Node::new(&json, 100 + 2);
        now += 1_000;
        admitted += burst(&mut nodes, 2, a, 50, now);
        sync_all(&mut nodes, &mut service, now + 10, 3);
        admitted += burst(&mut nodes, 2, a, 50, now + 700);
        assert_eq!(known_nodes(&nodes[0], now + 700), Some(3), "restart {k}");
        assert_eq!(known_nodes(&nodes[2], now + 700), Some(3), "restart {k}");
    }
    // A tenth of a share each time (before: its alone share each time).
    assert!(
        admitted - used <= 3 * 10,
        "{} after the restarts",
        admitted - used
    );
}

/// Calls the service counted but answered too late (timeouts, 5 s of
/// them): the first one's hits are sent again once the service answers
/// (it may have counted nothing), the later syncs are reads until then, so
/// only that one call's hits count twice (re-sent at every sync, every hit
/// of the 5 s would count about 25 times and refuse the honest caller for
/// the rest of the window).
#[test]
fn a_slow_service_counts_only_the_first_timed_out_calls_hits_twice() {
    let mut nodes = fleet(1, &config(300, "address"));
    let mut service = Service::default();
    sync_all(&mut nodes, &mut service, T0, 3);
    let a = "10.0.2.5";
    let mut admitted = u64::from(burst(&mut nodes, 0, a, 1, T0 + 650));
    sync_all(&mut nodes, &mut service, T0 + 700, 1);
    service.slow = true;
    let mut now = T0 + 800;
    for _ in 0..50 {
        now += 100;
        if now.is_multiple_of(200) {
            sync_all(&mut nodes, &mut service, now, 1);
        }
        admitted += u64::from(burst(&mut nodes, 0, a, 4, now));
    }
    service.slow = false;
    sync_all(&mut nodes, &mut service, now + 200, 3);
    // The first timed-out sync carried one sync's worth, 2 × 4.
    assert!(service.added_slow <= 8, "{}", service.added_slow);
    assert_eq!(service.added, admitted + service.added_slow);
    // The honest caller got its budget less those.
    admitted += u64::from(burst(&mut nodes, 0, a, 300, now + 900));
    assert_eq!(admitted, 300 - service.added_slow);
}

/// Issue 38: three nodes, every sync timing out for 5 s while the service
/// counts nothing (a Redis failover), 4 requests a node every 100 ms. Every
/// node's hits of the outage reach the service once it answers again, so
/// the fleet admits its budget once (before, they were never sent again
/// and each node admitted on top of them what the others had spent).
#[test]
fn a_failover_of_timed_out_syncs_loses_no_hits_and_admits_the_budget_once() {
    let mut nodes = fleet(3, &config(300, "address"));
    let mut service = Service::default();
    sync_all(&mut nodes, &mut service, T0, 3);
    let a = "10.0.2.6";
    let mut admitted = 0;
    let mut now = T0 + 600;
    for step in 0..200u64 {
        now += 100;
        service.stuck = (10..60).contains(&step);
        if now.is_multiple_of(200) {
            sync_all(&mut nodes, &mut service, now, 1);
        }
        for node in 0..3 {
            admitted += u64::from(burst(&mut nodes, node, a, 4, now));
        }
    }
    sync_all(&mut nodes, &mut service, now + 200, 3);
    assert_eq!(service.added, admitted, "each counted once");
    // The stated error: 2 × (nodes − 1) × 40 a second × 200 ms, 1 and a
    // join share (10) a node.
    assert!(admitted <= 300 + 32 + 3 + 30, "{admitted}");
}

#[test]
fn one_node_alone_with_the_load_may_use_the_whole_budget() {
    let mut nodes = fleet(3, &config(300, "address"));
    let mut service = Service::default();
    let mut admitted = 0;
    for k in 0..1_200u64 {
        let now = T0 + k * 10;
        if k % 20 == 0 {
            for n in nodes.iter_mut() {
                n.sync(&mut service, now);
            }
        }
        admitted += u64::from(nodes[0].hit("10.0.0.2", now));
    }
    assert!((285..=300).contains(&admitted), "{admitted}");
}

#[test]
fn without_the_service_each_node_takes_its_share_then_converges() {
    let mut nodes = fleet(3, &config(300, "address"));
    let mut service = Service::default();
    // The nodes learn there are three of them (a sync asks each node's own
    // key, the next adds its 1, the one after reads the count).
    for t in [T0, T0 + 200, T0 + 300] {
        for n in nodes.iter_mut() {
            n.sync(&mut service, t);
        }
    }
    service.down = true;
    let admitted = run(&mut nodes, &mut service, "10.0.0.3", 300, T0 + 400, 6_000);
    assert_eq!(admitted, vec![100, 100, 100], "300 / 3 nodes, each alone");
    assert!(nodes[0].active().limiter.take_alone() > 0);
    // Back: the hits admitted alone are sent, and the fleet refuses.
    service.down = false;
    for n in nodes.iter_mut() {
        assert_eq!(n.sync(&mut service, T0 + 7_000), vec![Settled::Answered]);
    }
    assert_eq!(service.added, 300);
    let more = run(&mut nodes, &mut service, "10.0.0.3", 50, T0 + 7_400, 1_000);
    assert_eq!(more, vec![0, 0, 0]);
}

#[test]
fn a_failed_sync_sends_its_hits_again() {
    let mut nodes = fleet(1, &config(300, "address"));
    let mut service = Service::default();
    let node = &mut nodes[0];
    node.sync(&mut service, T0);
    // A key new to the node: one admission, then its first answer.
    assert!(node.hit("10.0.0.4", T0 + 5));
    node.sync(&mut service, T0 + 9);
    for k in 0..5 {
        assert!(node.hit("10.0.0.4", T0 + 10 + k));
    }
    service.down = true;
    assert!(matches!(
        node.sync(&mut service, T0 + 200)[..],
        [Settled::Failed(_)]
    ));
    service.down = false;
    node.sync(&mut service, T0 + 400);
    assert_eq!(service.added, 6);
}

#[test]
fn ten_thousand_callers_are_cut_into_bounded_calls() {
    let mut nodes = fleet(1, &config(5, "address"));
    let mut service = Service::default();
    let node = &mut nodes[0];
    // The mock's tables track 32 callers; the rest share the overflow.
    for i in 0..1_000u32 {
        node.hit(&format!("10.{}.{}.1", i / 250, i % 250), T0 + u64::from(i));
    }
    let active = node.active();
    let (r, b) = (
        crate::config::plan::RouteId(0),
        crate::config::plan::BoundId(0),
    );
    let lane = active.limiter.lane(r, b).unwrap();
    let tracked = crate::count::lane::tracked(&node.host.pipe.store, lane).unwrap();
    node.sync(&mut service, T0 + 2_000);
    let keys: usize = service.calls.iter().sum();
    // Every tracked key, the overflow counter, the heartbeat and the
    // node's own key.
    assert_eq!(keys, tracked as usize + 3, "{:?}", service.calls);
    assert!(service.calls.iter().all(|&n| n <= MAX_DESCRIPTORS));
    // The callers past the cap share one counter and one limit: alone
    // before any answer, 5 / 3 nodes of it.
    let overflow = service
        .counts
        .iter()
        .find(|((k, _), _)| k.ends_with("address=overflow"))
        .map(|(_, n)| *n)
        .unwrap();
    assert_eq!(overflow, 1);
}

#[test]
fn a_service_without_the_domain_is_a_failed_sync() {
    let mut nodes = fleet(1, &config(5, "route"));
    let node = &mut nodes[0];
    assert!(node.hit("10.0.0.5", T0));
    node.host.pipe.now = T0 + 1;
    node.node.sync(&mut node.host);
    let calls = node.host.take_calls();
    let none = proto::RateLimitResponse {
        overall_code: 1,
        statuses: vec![proto::DescriptorStatus::default(); 3],
    }
    .encode_to_vec();
    node.host.pipe.now = T0 + 2;
    let settled = node
        .host
        .answer(&mut node.node, calls[0].token, 0, &none)
        .unwrap();
    assert!(
        matches!(
            settled,
            Settled::Failed(crate::rls::RlsError::NoLimit { .. })
        ),
        "{settled:?}"
    );
}

// proptest builds natively only (the lib's tests also run as wasm).
#[cfg(not(target_arch = "wasm32"))]
mod properties {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        /// A request from address `addr` to node `node`.
        Hit { node: usize, addr: u8 },
        /// Node `node` syncs.
        Sync { node: usize },
        /// The service goes down or comes back.
        Toggle,
        /// The service starts or stops timing out (it still counts).
        Slow,
        /// Time passes.
        Wait { ms: u64 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0..3usize, 0..4u8).prop_map(|(node, addr)| Op::Hit { node, addr }),
            3 => (0..3usize).prop_map(|node| Op::Sync { node }),
            1 => Just(Op::Toggle),
            1 => Just(Op::Slow),
            2 => (1..400u64).prop_map(|ms| Op::Wait { ms }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Whatever the interleaving of requests, syncs, outages and
        /// timeouts within one window, every admitted hit reaches the
        /// service, once more only for each call that counted it and then
        /// timed out (a sync that never reached it, or timed out, sends its
        /// hits again, a timed-out one once the service answers again; an
        /// answered one never), and nothing refused is ever sent.
        #[test]
        fn every_admitted_hit_is_counted_once_and_again_only_for_a_timed_out_call(ops in proptest::collection::vec(op(), 1..300)) {
            let mut nodes = fleet(3, &config(20, "address"));
            let mut service = Service::default();
            let mut now = T0;
            let mut admitted = 0u64;
            let mut timed_out = false;
            for op in ops {
                match op {
                    Op::Hit { node, addr } => {
                        admitted += u64::from(nodes[node].hit(&format!("10.0.1.{addr}"), now));
                    }
                    Op::Sync { node } => {
                        nodes[node].sync(&mut service, now);
                    }
                    Op::Toggle => service.down = !service.down,
                    Op::Slow => {
                        service.slow = !service.slow;
                        timed_out |= service.slow;
                    }
                    Op::Wait { ms } => now = (now + ms).min(T0 + 50_000),
                }
                prop_assert!(service.added <= admitted + service.added_slow);
            }
            service.down = false;
            service.slow = false;
            // The service back: three syncs a node settle everything (a
            // read answered, then the held hits sent again).
            for round in 0..3 {
                for n in nodes.iter_mut() {
                    n.sync(&mut service, now + 1 + round);
                }
            }
            prop_assert!(service.added >= admitted, "{} of {admitted}", service.added);
            prop_assert!(service.added <= admitted + service.added_slow);
            if !timed_out {
                prop_assert_eq!(service.added, admitted);
            }
        }
    }
}

#[test]
fn a_sync_call_may_take_a_sync_period_not_a_requests_timeout() {
    let mut nodes = fleet(1, &config(5, "route"));
    let node = &mut nodes[0];
    node.node.sync(&mut node.host);
    let calls = node.host.take_calls();
    let call = &calls[0];
    // timeout_ms is the default 100, sync_ms 200.
    assert_eq!((call.cluster.as_str(), call.timeout_ms), ("rls", 200));
}

#[test]
fn a_failed_sync_is_taken_as_possibly_counted_unless_envoy_says_it_never_left() {
    use crate::node::fleet_sync::failed_call_status;
    const DEADLINE: u32 = 4;
    const UNAVAILABLE: u32 = 14;
    // No answer at all, a timeout, a reset after sending: maybe counted.
    assert_eq!(failed_call_status(UNAVAILABLE, false, ""), DEADLINE);
    assert_eq!(
        failed_call_status(UNAVAILABLE, true, "upstream reset"),
        DEADLINE
    );
    assert_eq!(failed_call_status(DEADLINE, true, ""), DEADLINE);
    // Envoy says the service was never reached: counted nothing.
    for m in [
        "upstream connect error or disconnect/reset before headers. reset reason: connection failure",
        "no healthy upstream",
        "upstream overflow",
    ] {
        assert_eq!(failed_call_status(UNAVAILABLE, true, m), UNAVAILABLE, "{m}");
    }
    // An answer is no failure.
    assert_eq!(failed_call_status(0, true, ""), 0);
}

#[test]
fn the_node_id_is_read_from_envoys_serialized_node() {
    use crate::node::fleet_sync::node_id_of;
    // Node { id: "gw-1", cluster: "ingress" } and its fields in another order.
    let node = [b"\x0a\x04gw-1".as_slice(), b"\x12\x07ingress"].concat();
    assert_eq!(node_id_of(&node).as_deref(), Some("gw-1"));
    let reordered = [b"\x12\x07ingress".as_slice(), b"\x0a\x04gw-1"].concat();
    assert_eq!(node_id_of(&reordered).as_deref(), Some("gw-1"));
    assert_eq!(node_id_of(b"\x12\x07ingress"), None, "no id");
    assert_eq!(node_id_of(b"\x0a\x09short"), None, "truncated");
    assert_eq!(node_id_of(b"\x0a\x02\xff\xfe"), None, "not UTF-8");
}

/// A fleet bound keyed per caller gives each caller the fleet's budget:
/// one caller that spent it across the fleet leaves another's whole (the
/// service counts each caller under its own key).
#[test]
fn each_caller_of_a_fleet_bound_has_a_fleet_budget_of_its_own() {
    let mut nodes = fleet(2, &config(20, "address"));
    let mut service = Service::default();
    sync_all(&mut nodes, &mut service, T0, 3);
    let first = run(&mut nodes, &mut service, "10.0.0.1", 40, T0 + 600, 4_000);
    assert!((18..=22).contains(&first.iter().sum::<u64>()), "{first:?}");
    let second = run(&mut nodes, &mut service, "10.0.0.2", 40, T0 + 5_000, 4_000);
    assert!(
        (18..=22).contains(&second.iter().sum::<u64>()),
        "{second:?}"
    );
}

/// A fleet bound `per: route` is one budget for every caller of the route
/// across the fleet: callers on different nodes spend the same one.
#[test]
fn a_route_wide_fleet_bound_is_one_budget_for_every_caller() {
    let mut nodes = fleet(2, &config(20, "route"));
    let mut service = Service::default();
    sync_all(&mut nodes, &mut service, T0, 3);
    // Each node meets another caller first (and only that one).
    let mut admitted = 0;
    let mut now = T0 + 600;
    for _ in 0..20 {
        for n in nodes.iter_mut() {
            n.sync(&mut service, now);
        }
        for k in 1..3 {
            admitted += u64::from(nodes[0].hit("10.0.0.1", now + k));
            admitted += u64::from(nodes[1].hit("10.0.0.2", now + k));
        }
        now += 200;
    }
    assert!((18..=24).contains(&admitted), "{admitted} of 20");
}

/// The heartbeat under a slow service (a node whose first calls time out
/// must not stay uncounted for the minute): an add that timed out but
/// landed is read back, not added again; one that was lost is added again.
/// Every node is counted once.
#[test]
fn a_timed_out_heartbeat_is_read_back_neither_missed_nor_counted_twice() {
    let json = config(300, "address");
    let mut nodes = fleet(3, &json);
    let mut service = Service::default();
    let beats = |s: &Service| -> Vec<u64> {
        let mut v: Vec<u64> = s
            .counts
            .iter()
            .filter(|((k, _), _)| k.starts_with("ratebound="))
            .map(|(_, n)| *n)
            .collect();
        v.sort_unstable();
        v
    };
    // Node 0: every call of its first three syncs counted, then too late.
    service.slow = true;
    sync_all(&mut nodes[..1], &mut service, T0, 3);
    service.slow = false;
    // Node 1: its add lost (the service down for that sync only).
    sync_all(&mut nodes[1..2], &mut service, T0, 1);
    service.down = true;
    sync_all(&mut nodes[1..2], &mut service, T0 + 200, 1);
    service.down = false;
    sync_all(&mut nodes, &mut service, T0 + 1_000, 3);
    // The count 3, each own key 1.
    assert_eq!(beats(&service), vec![1, 1, 1, 3]);
    for n in &nodes {
        assert_eq!(known_nodes(n, T0 + 1_600), Some(3));
    }
    // A restart in the same minute finds its 1 added.
    nodes[2] = Node::new(&json, 102);
    sync_all(&mut nodes[2..], &mut service, T0 + 2_000, 3);
    assert_eq!(beats(&service), vec![1, 1, 1, 3]);
    assert_eq!(known_nodes(&nodes[2], T0 + 2_600), Some(3));
}

/// More keys than a sync carries: the first call full with the heartbeat
/// and the node's own key leading, every call full but the last, exactly
/// the cap's keys sent (and counted as sent), the rest in the next sync.
#[test]
fn a_sync_past_its_key_cap_sends_the_cap_in_full_calls_and_the_rest_next() {
    let table = crate::count::lane::Table {
        buckets: 512,
        per_bucket: 4,
        cap: 2_048,
    };
    let mut node = Node::with_table(&config(5, "address"), 100, table);
    let mut service = Service::default();
    // Callers past the table share the overflow counter (and its limit).
    let admitted: u64 = (0..1_200u32)
        .map(|i| {
            let address = format!("10.{}.{}.1", i / 250, i % 250);
            u64::from(node.hit(&address, T0 + u64::from(i / 100)))
        })
        .sum();
    let lane = node
        .active()
        .limiter
        .lane(
            crate::config::plan::RouteId(0),
            crate::config::plan::BoundId(0),
        )
        .unwrap()
        .clone();
    let tracked = crate::count::lane::tracked(&node.host.pipe.store, &lane).unwrap() as usize;
    assert!(tracked > MAX_SYNC_KEYS, "{tracked}");
    node.sync(&mut service, T0 + 1_000);
    let calls = &service.calls;
    let (last, full) = calls.split_last().unwrap();
    assert_eq!(calls.iter().sum::<usize>(), MAX_SYNC_KEYS + 2, "{calls:?}");
    assert!(full.iter().all(|&n| n == MAX_DESCRIPTORS), "{calls:?}");
    assert!(*last <= MAX_DESCRIPTORS, "{calls:?}");
    let sent = |n: &Node| -> usize {
        n.host
            .stats_of(0)
            .iter()
            .map(|s| match s {
                NodeStat::FleetSyncSent(k) => *k,
                _ => 0,
            })
            .sum()
    };
    // Five calls' worth of keys.
    assert_eq!(sent(&node), 5 * MAX_DESCRIPTORS);
    assert!(service.added < admitted);
    // The next sync sends the hits left (unsent hits go first).
    node.sync(&mut service, T0 + 1_200);
    assert_eq!(service.added, admitted);
    assert!(service.calls.iter().all(|&n| n <= MAX_DESCRIPTORS));
}

/// One call carries two fleet bounds' keys: each key's fleet count comes
/// back to that key, lane by lane, in the call's order.
#[test]
fn a_call_of_two_lanes_puts_each_keys_count_back_to_it() {
    let json = r#"{"instance":"api",
        "rate_limit_service":{"cluster":"rls","domain":"api","sync_ms":200,"fleet_nodes":3},
        "routes":[{"name":"api","bounds":[
          {"name":"a","per":"address","limit":300,"window":"PT1M","scope":"fleet"},
          {"name":"b","per":"address","limit":500,"window":"PT1M","scope":"fleet"}]}]}"#;
    let mut node = Node::new(json, 100);
    let mut service = Service::default();
    // Bound b's keys have 100 more counted elsewhere in the fleet.
    service.elsewhere.insert("api.b".into(), 100);
    let callers = ["10.0.0.1", "10.0.0.2", "10.0.0.3"];
    for (i, c) in callers.iter().enumerate() {
        for k in 0..=i {
            assert!(node.hit(c, T0 + k as u64));
        }
    }
    node.sync(&mut service, T0 + 1_000);
    assert_eq!(
        service.calls,
        [2 + 2 * callers.len()],
        "one call for both lanes"
    );
    let active = node.active();
    for (b, elsewhere) in [(0, 0), (1, 100)] {
        let lane = active
            .limiter
            .lane(
                crate::config::plan::RouteId(0),
                crate::config::plan::BoundId(b),
            )
            .unwrap();
        for (i, c) in callers.iter().enumerate() {
            let caller = crate::pipeline::limiter::Caller {
                address: c,
                identity: None,
                model: None,
            };
            let key = active
                .limiter
                .caller_key(crate::config::Per::Address, &caller);
            let e = crate::count::fleet_lane::peek(&node.host.pipe.store, lane, key)
                .unwrap()
                .unwrap();
            assert_eq!(
                e.counts.cur,
                elsewhere + i as u32 + 1,
                "bound {b}, {c}: {e:?}"
            );
        }
    }
}

/// Once its 1 is added for the minute, a node's syncs read the count
/// (the heartbeat, 0 added) without its own key; the next minute asks
/// the own key again.
#[test]
fn after_its_beat_a_nodes_syncs_carry_no_own_key_until_the_next_minute() {
    let mut nodes = fleet(1, &config(20, "address"));
    let mut service = Service::default();
    // Own key asked, then 1 added to the count and to it: two descriptors.
    sync_all(&mut nodes, &mut service, T0, 2);
    assert_eq!(service.calls, [2, 2]);
    nodes[0].hit("10.0.0.1", T0 + 500);
    nodes[0].sync(&mut service, T0 + 600);
    assert_eq!(
        service.calls[2..],
        [2],
        "the heartbeat and the caller's key"
    );
    nodes[0].sync(&mut service, T0 + 60_000);
    assert_eq!(
        service.calls[3..],
        [3],
        "a new minute: the own key asked beside them"
    );
}

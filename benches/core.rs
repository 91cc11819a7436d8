//! The decision core without the host: `cargo bench --bench core`.
//! Host calls (shared data, properties, headers) cost 1–2.5 µs each in
//! Envoy and dominate a request; these figures are what is left.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use criterion::{criterion_group, criterion_main, Criterion};
use ratebound::config::parse;
use ratebound::config::plan::{Plan, RequestInfo, RouteId};
use ratebound::count::lane::{self, Lane, Table};
use ratebound::count::node_lane;
use ratebound::count::store::MemStore;
use ratebound::count::window::{Counts, Rate};
use ratebound::pipeline::decide;
use ratebound::pipeline::limiter::{Caller, Limiter};
use ratebound::pipeline::mock::{Filter, MockHost};
use std::hint::black_box;

fn full_table(store: &MemStore) -> Lane {
    let rate = Rate {
        limit: 1_000_000,
        window_ms: 60_000,
    };
    let lane = Lane::new("b:0", 1, rate, Some(Table::DEFAULT));
    lane.create_keys(store).unwrap();
    for caller in 0..u64::from(Table::DEFAULT.cap) {
        let key = caller.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let p = node_lane::prepare(store, &lane, key, 1_000).unwrap();
        lane::commit(store, &lane, key, &p).unwrap();
    }
    assert_eq!(lane::tracked(store, &lane).unwrap(), Table::DEFAULT.cap);
    lane
}

fn core(c: &mut Criterion) {
    let rate = Rate {
        limit: 100,
        window_ms: 60_000,
    };
    let counts = Counts {
        win: 1_000,
        cur: 40,
        prev: 70,
    };
    c.bench_function("window decide", |b| {
        b.iter(|| rate.decide(black_box(counts), black_box(60_030_000)))
    });

    let store = MemStore::new();
    let lane = full_table(&store);
    let mut i = 0u64;
    c.bench_function("slot lookup, full table (10,000 callers)", |b| {
        b.iter(|| {
            i = (i + 7) % u64::from(Table::DEFAULT.cap);
            let key = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            node_lane::prepare(&store, &lane, black_box(key), 2_000).unwrap()
        })
    });

    let json = r#"{"routes":[{"name":"r","bounds":[
        {"per":"route","limit":4000000000,"window":"PT1M"},
        {"per":"address","limit":4000000000,"window":"PT1M"}]}]}"#;
    let plan = Plan::compile(&parse(json.as_bytes()).unwrap());
    let store = MemStore::new();
    let lim = Limiter::in_store(plan, [1, 2], &store, ("l", 1), Table::DEFAULT).unwrap();
    let caller = Caller {
        address: "10.1.2.3",
        identity: None,
        model: None,
    };
    let mut now = 1_000_000u64;
    c.bench_function("check + record, 2 bounds (in-memory store)", |b| {
        b.iter(|| {
            now += 1;
            decide(&lim, &store, RouteId(0), None, black_box(&caller), now)
        })
    });

    // The whole request path the filter runs (route, bounds, the figures
    // for the response), over the recording host: its bookkeeping is
    // included, so compare builds with it, not with the line above.
    let mut host = MockHost::new(1_000_000).from_address("10.1.2.3");
    let f = Filter::new(&host.store, json).unwrap();
    c.bench_function("request path, 2 bounds (recording host)", |b| {
        b.iter(|| {
            host.clear();
            host.now += 1;
            f.request(black_box(&mut host))
        })
    });
}

/// Which route a request is: the request path normalised once, then the
/// matchers in order (the last route takes it).
fn matching(c: &mut Criterion) {
    let json = r#"{"routes":[
        {"name":"admin","match":{"host":"admin.example.com","path_prefix":"/admin/"},"bounds":[{"per":"route","limit":5,"window":"PT1M"}]},
        {"name":"login","match":{"path_prefix":"/api/v1/login","methods":["POST"]},"bounds":[{"per":"address","limit":5,"window":"PT1M"}]},
        {"name":"api","match":{"host":"api.example.com","path_prefix":"/api/","methods":["GET","POST"]},"bounds":[{"per":"address","limit":5,"window":"PT1M"}]}]}"#;
    let plan = Plan::compile(&parse(json.as_bytes()).unwrap());
    for (what, path, host) in [
        (
            "a normal path",
            "/api/v1/orders/12345/lines?page=2",
            "api.example.com",
        ),
        (
            "an odd spelling",
            "//api/v1/./orders/%31%32345/lines?page=2",
            "API.example.com.:443",
        ),
    ] {
        let info = RequestInfo {
            route_name: None,
            host: Some(host),
            path: Some(path),
            method: Some("GET"),
        };
        assert_eq!(plan.route_for(&info), Some(RouteId(2)));
        c.bench_function(&format!("route_for, 3 routes, {what}"), |b| {
            b.iter(|| plan.route_for(black_box(&info)))
        });
    }
}

criterion_group!(benches, core, matching);
criterion_main!(benches);

//! Matching cost of `OpTree::find` with 200 operations: 40 resources, each
//! with a collection, an item, a literal beside the item template
//! (`/orders/mine`), and nested sub-resources (`/orders/{id}/lines/{lineId}`).
//! Prints the median of several runs of 1,000,000 lookups, in nanoseconds
//! per lookup, for hits and for misses; then what normalising the request
//! path costs before the lookup (`ratebound::config::normalize::path`), for paths
//! already normal (borrowed) and for odd spellings of the same paths.
//!
//! `cargo run --release --example match_bench`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use ratebound::config::normalize;
use ratebound::config::operations::{parse_template, OpTree, Segment};
use std::hint::black_box;
use std::time::Instant;

const RESOURCES: [&str; 40] = [
    "orders",
    "users",
    "products",
    "carts",
    "payments",
    "invoices",
    "shipments",
    "returns",
    "reviews",
    "categories",
    "coupons",
    "addresses",
    "wishlists",
    "sessions",
    "tokens",
    "teams",
    "projects",
    "issues",
    "comments",
    "labels",
    "webhooks",
    "events",
    "files",
    "folders",
    "images",
    "videos",
    "playlists",
    "artists",
    "albums",
    "tracks",
    "stores",
    "inventory",
    "suppliers",
    "warehouses",
    "customers",
    "tickets",
    "messages",
    "threads",
    "reports",
    "audits",
];
const RUNS: usize = 9;
const LOOKUPS: usize = 1_000_000;

fn operations() -> Vec<(String, String)> {
    let mut ops = Vec::new();
    for (i, r) in RESOURCES.iter().enumerate() {
        let sub = RESOURCES[(i + 7) % RESOURCES.len()];
        ops.push(("GET".to_string(), format!("/v1/{r}")));
        ops.push(("POST".to_string(), format!("/v1/{r}/{{id}}/{sub}")));
        ops.push(("GET".to_string(), format!("/v1/{r}/{{id}}")));
        ops.push((
            "DELETE".to_string(),
            format!("/v1/{r}/{{id}}/{sub}/{{subId}}"),
        ));
        // A literal beside the template, or an action on the item.
        if i % 2 == 0 {
            ops.push(("GET".to_string(), format!("/v1/{r}/mine")));
        } else {
            ops.push(("POST".to_string(), format!("/v1/{r}/{{id}}/archive")));
        }
    }
    ops
}

/// A request path for a template: parameters become ids.
fn request(template: &str, n: usize) -> String {
    let mut out = String::new();
    for (k, part) in template.split('{').enumerate() {
        if k == 0 {
            out.push_str(part);
        } else {
            let (_, rest) = part.split_once('}').unwrap();
            out.push_str(&format!("{}", 10_000 + n * 7 + k));
            out.push_str(rest);
        }
    }
    if n.is_multiple_of(3) {
        out.push_str("?page=2&sort=desc");
    }
    out
}

fn median_ns(tree: &OpTree, requests: &[(String, String)], want_hit: bool) -> f64 {
    let mut runs = Vec::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        let mut found = 0usize;
        for k in 0..LOOKUPS {
            let (m, p) = &requests[k % requests.len()];
            if black_box(tree.find(black_box(m), black_box(p))).is_some() {
                found += 1;
            }
        }
        let elapsed = start.elapsed();
        assert_eq!(
            found == LOOKUPS,
            want_hit,
            "hits and misses are what they say"
        );
        assert!(want_hit || found == 0);
        runs.push(elapsed.as_nanos() as f64 / LOOKUPS as f64);
    }
    runs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    runs[RUNS / 2]
}

/// Median nanoseconds of `normalize::path` over `paths`.
fn normalise_ns(paths: &[String]) -> f64 {
    let mut runs = Vec::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        let mut len = 0usize;
        for k in 0..LOOKUPS {
            len += black_box(normalize::path(black_box(&paths[k % paths.len()]))).len();
        }
        black_box(len);
        runs.push(start.elapsed().as_nanos() as f64 / LOOKUPS as f64);
    }
    runs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    runs[RUNS / 2]
}

/// An odd spelling of a normal path: a doubled slash, a dot segment, and
/// its first letter percent-encoded.
fn odd(path: &str) -> String {
    let (p, q) = path.split_once('?').map_or((path, ""), |(p, q)| (p, q));
    let mut out = p.replacen("/v1/", "//v1/./", 1);
    if let Some(i) = out.find(|c: char| c.is_ascii_lowercase()) {
        let c = out.as_bytes()[i];
        out.replace_range(i..=i, &format!("%{c:02X}"));
    }
    if !q.is_empty() {
        out.push('?');
        out.push_str(q);
    }
    out
}

fn main() {
    let ops = operations();
    assert_eq!(ops.len(), 200);
    let parsed: Vec<(&str, Vec<Segment>)> = ops
        .iter()
        .map(|(m, t)| (m.as_str(), parse_template(t).unwrap()))
        .collect();
    let built = Instant::now();
    let tree = OpTree::new(parsed.iter().map(|(m, s)| (*m, s.as_slice())));
    let build_us = built.elapsed().as_secs_f64() * 1e6;

    let hits: Vec<(String, String)> = ops
        .iter()
        .enumerate()
        .map(|(n, (m, t))| (m.clone(), request(t, n)))
        .collect();
    for (n, (m, p)) in hits.iter().enumerate() {
        assert_eq!(tree.find(m, p), Some(n), "{m} {p}");
    }
    let misses: Vec<(String, String)> = RESOURCES
        .iter()
        .enumerate()
        .flat_map(|(i, r)| {
            [
                // Unknown resource, unknown action, too deep, wrong method.
                ("GET".to_string(), format!("/v1/un{r}/{i}")),
                ("GET".to_string(), format!("/v1/{r}/{i}/nothing-here")),
                ("GET".to_string(), format!("/v1/{r}/{i}/x/{i}/y/{i}")),
                ("PATCH".to_string(), format!("/v1/{r}/{i}")),
                ("GET".to_string(), format!("/v2/{r}")),
            ]
        })
        .collect();
    for (m, p) in &misses {
        assert_eq!(tree.find(m, p), None, "{m} {p}");
    }

    let hit = median_ns(&tree, &hits, true);
    let miss = median_ns(&tree, &misses, false);
    println!(
        "OpTree::find, {} operations ({} resources, nested parameters), tree built in {build_us:.0} µs",
        ops.len(),
        RESOURCES.len()
    );
    println!("  hits:   {hit:.0} ns per lookup (median of {RUNS} runs of {LOOKUPS} lookups)");
    println!("  misses: {miss:.0} ns per lookup (median of {RUNS} runs of {LOOKUPS} lookups)");

    let normal: Vec<String> = hits.iter().map(|(_, p)| p.clone()).collect();
    let odd: Vec<String> = normal.iter().map(|p| odd(p)).collect();
    for (n, ((m, p), o)) in hits.iter().zip(&odd).enumerate() {
        assert!(
            matches!(normalize::path(p), std::borrow::Cow::Borrowed(_)),
            "{p}"
        );
        assert_eq!(tree.find(m, &normalize::path(o)), Some(n), "{m} {o}");
    }
    let (plain, spelled) = (normalise_ns(&normal), normalise_ns(&odd));
    println!(
        "normalize::path before the lookup (e.g. {:?} is {:?}):",
        odd[1], normal[1]
    );
    println!("  already normal (borrowed): {plain:.0} ns per path");
    println!("  odd spellings (copied):    {spelled:.0} ns per path");
}

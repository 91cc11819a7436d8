//! The Grafana dashboard, the alert rules and the stats-tags manifests name
//! only stats that `ratebound::stats` defines (the names the filter gives
//! Envoy), every stat is on the dashboard or deliberately not, the tags
//! cut the instance, route and bound out of every name the module composes,
//! and the numbers they print beside the callers cap are the cap. A stat
//! renamed in one place and not the other fails here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use ratebound::count::lane::Table;
use ratebound::reading::words;
use ratebound::stats::{self, Kind, Stat, StatScope};
use regex::Regex;
use serde_json::Value;
use std::collections::BTreeSet;

const DASHBOARD: &str = "envoy-demo/grafana/ratebound.json";
const RULES: &str = "envoy-demo/prometheus/ratebound-rules.yaml";
const STATS_TAGS: &str = "envoy-demo/stats-tags.yaml";
const ISTIO_METRICS: &str = "envoy-demo/istio/metrics.yaml";

/// Stats the dashboard leaves out, and why.
const NOT_ON_THE_DASHBOARD: [(Stat, &str); 8] = [
    (
        Stat::AccountsUnreadable,
        "sign-in routes only; in docs/sign-in.md",
    ),
    (Stat::RlsCallsSaved, "a saving, not a health signal"),
    (
        Stat::RlsNoLimit,
        "alerted on (RateboundRateLimitServiceMisconfigured)",
    ),
    (Stat::FleetSyncKeys, "fleet bounds only; docs/fleet.md"),
    (Stat::CostsUnknown, "cost bounds only; docs/cost.md"),
    (Stat::RequestsUnclear, "cost bounds only; docs/cost.md"),
    (Stat::UsageAsked, "cost bounds only; docs/cost.md"),
    (
        Stat::CostsUnsent,
        "installation cost bounds only; alerted on (RateboundCostsUnsent)",
    ),
];

/// Rules on the host's metrics, not ratebound's: Envoy's VM reloads of the
/// module and istio-agent's fetches of it (their unit tests:
/// envoy-demo/prometheus/ratebound-rules.test.yaml).
const ON_HOST_METRICS: [&str; 6] = [
    "RateboundVmReloaded",
    "RateboundVmReloadFailing",
    "RateboundModuleFetchFailing",
    "RateboundServingDenyAll",
    "RateboundServingAllowAll",
    "RateboundPushRejected",
];

fn read(rel: &str) -> String {
    let path = format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn yaml(rel: &str) -> Value {
    serde_saphyr::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Every string of a JSON document.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
        Value::Object(o) => o.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// The `ratebound_...` words of a text: each a label of the stats tags,
/// or a stat's Prometheus series; `where_` says where, on failure.
fn stats_named(text: &str, where_: &str) -> BTreeSet<Stat> {
    let word = Regex::new(r"\bratebound_[A-Za-z0-9_]+\b").unwrap();
    let mut named = BTreeSet::new();
    for m in word.find_iter(text) {
        let w = m.as_str();
        if stats::LABELS.contains(&w) {
            continue;
        }
        let stat = Stat::from_prometheus(w).unwrap_or_else(|| {
            panic!(
                "{where_}: {w} is neither a label ({:?}) nor a series of a stat \
                 src/stats.rs defines",
                stats::LABELS
            )
        });
        named.insert(stat);
    }
    named
}

/// Every number written with thousands separators (`10,000`), and every
/// `vector(N)`: the callers cap is the only large number these files say.
fn assert_numbers_are_the_cap(text: &str, where_: &str) {
    let cap = u64::from(Table::DEFAULT.cap);
    let written = Regex::new(r"\b\d{1,3}(?:,\d{3})+\b").unwrap();
    for m in written.find_iter(text) {
        assert_eq!(
            m.as_str(),
            words::number(cap),
            "{where_}: {} beside the callers cap of {cap}",
            m.as_str()
        );
    }
    let vector = Regex::new(r"vector\((\d+)\)").unwrap();
    for c in vector.captures_iter(text) {
        assert_eq!(c[1].parse::<u64>().unwrap(), cap, "{where_}: {}", &c[0]);
    }
}

#[test]
fn the_dashboard_shows_defined_stats_and_leaves_out_only_those_it_says() {
    let doc: Value = serde_json::from_str(&read(DASHBOARD)).unwrap();
    let mut texts = Vec::new();
    strings(&doc, &mut texts);
    let shown = stats_named(&texts.join("\n"), DASHBOARD);
    let left_out: BTreeSet<Stat> = NOT_ON_THE_DASHBOARD.iter().map(|(s, _)| *s).collect();
    for stat in Stat::ALL {
        assert!(
            shown.contains(&stat) != left_out.contains(&stat),
            "{}: on the dashboard ({}) or in NOT_ON_THE_DASHBOARD ({}), exactly one",
            stat.name(),
            shown.contains(&stat),
            left_out.contains(&stat)
        );
    }
    // The queries and the variables' label_values() in particular.
    let queries: Vec<String> = doc["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| {
            let mut all = vec![p];
            all.extend(p["panels"].as_array().into_iter().flatten());
            all
        })
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .filter_map(|t| t["expr"].as_str().map(str::to_string))
        .collect();
    assert!(queries.len() >= 8, "{queries:?}");
    // The cap's line, `vector(N)`, is checked against the cap below.
    for q in queries.iter().filter(|q| !q.starts_with("vector(")) {
        assert!(!stats_named(q, DASHBOARD).is_empty(), "{q}: names no stat");
    }
    assert_numbers_are_the_cap(&texts.join("\n"), DASHBOARD);
    assert!(
        texts.iter().any(|t| t.contains("vector(")),
        "{DASHBOARD}: the cap line is gone"
    );
}

#[test]
fn the_alert_rules_name_defined_stats() {
    let doc = yaml(RULES);
    let rules: Vec<&Value> = doc["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .collect();
    assert!(rules.len() >= 5, "{rules:?}");
    let mut alerted = BTreeSet::new();
    for r in &rules {
        let name = r["alert"].as_str().unwrap();
        let expr = r["expr"].as_str().unwrap();
        let named = stats_named(expr, &format!("{RULES} {name}"));
        assert!(
            !named.is_empty() || ON_HOST_METRICS.contains(&name),
            "{name}: {expr} names no stat"
        );
        alerted.extend(named);
        let mut texts = Vec::new();
        strings(r, &mut texts);
        stats_named(&texts.join("\n"), &format!("{RULES} {name}"));
    }
    // The stats whose every increase is a problem have an alert.
    for stat in [
        Stat::Overflow,
        Stat::Tracked,
        Stat::StoreErrors,
        Stat::RlsErrors,
        Stat::RlsNoLimit,
        Stat::FleetSyncErrors,
        Stat::FleetAlone,
    ] {
        assert!(alerted.contains(&stat), "no alert on {}", stat.name());
    }
    // Comments too (they show queries), and the cap they quote.
    let text = read(RULES);
    stats_named(&text, RULES);
    assert_numbers_are_the_cap(&text, RULES);
    // The near-the-cap alert fires below the cap.
    let near = Regex::new(r"\(ratebound_tracked\) > (\d+)").unwrap();
    let at = near
        .captures(&text)
        .map(|c| c[1].parse::<u64>().unwrap())
        .expect("the tracked alert's threshold");
    assert!(at < u64::from(Table::DEFAULT.cap), "{at}");
}

/// The stats tags as Envoy applies them: each regex on the whole name, the
/// first group cut out, the second the tag's value.
fn tag(tags: &[(String, Regex)], name: &str) -> (Vec<(String, String)>, String) {
    let mut values = Vec::new();
    let mut cut = Vec::new();
    for (tag, re) in tags {
        if let Some(c) = re.captures(name) {
            values.push((tag.clone(), c[2].to_string()));
            cut.push(c.get(1).unwrap().range());
        }
    }
    let rest: String = name
        .char_indices()
        .filter(|(i, _)| !cut.iter().any(|r| r.contains(i)))
        .map(|(_, c)| c)
        .collect();
    (values, rest)
}

#[test]
fn the_stats_tags_cut_instance_route_and_bound_out_of_every_name() {
    let tags: Vec<(String, Regex)> = yaml(STATS_TAGS)["stats_config"]["stats_tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let name = t["tag_name"].as_str().unwrap().to_string();
            (name, Regex::new(t["regex"].as_str().unwrap()).unwrap())
        })
        .collect();
    let names: Vec<&str> = tags.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, stats::LABELS);
    let label = |l: &str, v: &str| (l.to_string(), v.to_string());
    for instance in ["shop", "my-shop_2"] {
        for stat in Stat::ALL {
            // What Prometheus shows: the tagged name without `wasmcustom.`,
            // `.` as `_`.
            let series = |rest: &str| {
                rest.strip_prefix(&format!("{}.", stats::ENVOY_NAMESPACE))
                    .unwrap()
                    .replace('.', "_")
            };
            if stat.scope() == StatScope::Instance {
                let name = stats::in_envoy(&stats::instance_name(instance, stat));
                let (values, rest) = tag(&tags, &name);
                assert_eq!(values, [label(stats::LABEL_INSTANCE, instance)], "{name}");
                assert_eq!(series(&rest), format!("ratebound_{}", stat.name()));
                continue;
            }
            for (route, bound) in [
                ("api", "per_address"),
                ("sign-in", "attempts"),
                ("api", "payOrder.addr"),
            ] {
                let name = stats::in_envoy(&stats::bound_name(instance, route, bound, stat));
                let (values, rest) = tag(&tags, &name);
                assert_eq!(
                    values,
                    [
                        label(stats::LABEL_INSTANCE, instance),
                        label(stats::LABEL_ROUTE, route),
                        label(stats::LABEL_BOUND, bound),
                    ],
                    "{name}"
                );
                let split = stats::split(&name).unwrap();
                assert_eq!(
                    (split.instance, split.bound, split.stat),
                    (instance, Some((route, bound)), stat.name())
                );
                assert_eq!(series(&rest), format!("ratebound_{}", stat.name()));
                assert!(
                    stat.prometheus_series()
                        .iter()
                        .all(|s| s.starts_with(&series(&rest))),
                    "{name}"
                );
            }
        }
    }
    // The examples in the comments name stats that exist (the untagged
    // example ends with one).
    let untagged = Regex::new(r"\bratebound_[a-z]+_[a-z]+_[a-z_]+_(refused|allowed)\b").unwrap();
    for rel in [STATS_TAGS, ISTIO_METRICS] {
        let text = read(rel);
        stats_named(&untagged.replace_all(&text, "ratebound_$1"), rel);
    }
}

#[test]
fn kinds_are_what_the_dashboard_and_the_rules_assume() {
    // Gauges are read as they are (max by), counters as rates, and the
    // latency as a histogram's buckets.
    assert_eq!(Stat::Tracked.kind(), Kind::Gauge);
    assert_eq!(Stat::RlsLatencyMs.kind(), Kind::Histogram);
    let text = format!("{}\n{}", read(DASHBOARD), read(RULES));
    let rated = Regex::new(r"(?:rate|increase)\((ratebound_[a-z_]+)").unwrap();
    for c in rated.captures_iter(&text) {
        let stat = Stat::from_prometheus(&c[1])
            .unwrap_or_else(|| panic!("{}: not a stat's series", &c[1]));
        assert!(
            stat.kind() == Kind::Counter || c[1].ends_with("_bucket"),
            "{}: a {:?} read as a rate",
            &c[1],
            stat.kind()
        );
    }
}

#[test]
fn the_stats_the_docs_show_are_defined() {
    // `/stats` output as the README and docs quote it.
    let line = Regex::new(r"(?m)^\s*(wasmcustom\.ratebound\.[A-Za-z0-9_.-]+): ").unwrap();
    let mut files = vec!["README.md".to_string()];
    let docs = format!("{}/docs", env!("CARGO_MANIFEST_DIR"));
    for e in std::fs::read_dir(&docs).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") {
            files.push(format!("docs/{name}"));
        }
    }
    let mut seen = 0;
    for rel in files {
        for c in line.captures_iter(&read(&rel)) {
            let name = stats::split(&c[1]).unwrap_or_else(|| panic!("{rel}: {}", &c[1]));
            let stat = Stat::from_name(name.stat)
                .unwrap_or_else(|| panic!("{rel}: {} is not a stat", &c[1]));
            assert_eq!(
                name.bound.is_some(),
                stat.scope() != StatScope::Instance,
                "{rel}: {}",
                &c[1]
            );
            seen += 1;
        }
    }
    assert!(seen >= 5, "the README's /stats example is gone ({seen})");
}

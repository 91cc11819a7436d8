//! The Istio side of ratebound's metrics (envoy-demo/istio/metrics.yaml,
//! metrics-meshconfig.yaml): the EnvoyFilter merges into the gateway's
//! bootstrap exactly the stats tags of envoy-demo/stats-tags.yaml (which
//! tests/e2e/test_prometheus.py runs in a real Envoy), on the workloads the
//! WasmPlugin runs on, and the proxies keep `wasmcustom.ratebound.` stats.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;

fn load(rel: &str) -> Value {
    let path = format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn bootstrap_patch() -> Value {
    let doc = load("envoy-demo/istio/metrics.yaml");
    assert_eq!(doc["kind"], "EnvoyFilter");
    let patches = doc["spec"]["configPatches"].as_array().unwrap();
    assert_eq!(patches.len(), 1, "{patches:?}");
    let p = &patches[0];
    assert_eq!(p["applyTo"], "BOOTSTRAP");
    assert_eq!(
        p["patch"]["operation"], "MERGE",
        "merged into Istio's bootstrap"
    );
    p["patch"]["value"].clone()
}

#[test]
fn the_envoy_filter_carries_the_stats_tags_of_stats_tags_yaml() {
    let tags = load("envoy-demo/stats-tags.yaml")["stats_config"]["stats_tags"].clone();
    let patched = bootstrap_patch()["stats_config"]["stats_tags"].clone();
    assert_eq!(
        patched, tags,
        "metrics.yaml and stats-tags.yaml drifted apart"
    );
    let tags = tags.as_array().unwrap();
    let names: Vec<&str> = tags
        .iter()
        .map(|t| t["tag_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["ratebound_instance", "ratebound_route", "ratebound_bound"]
    );
    for t in tags {
        let name = t["tag_name"].as_str().unwrap();
        // A Prometheus label name, and none Prometheus or Envoy uses itself.
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        assert!(!name.starts_with("__") && !name.starts_with("envoy"));
        let regex = t["regex"].as_str().unwrap();
        assert!(regex.starts_with(r"^wasmcustom\.ratebound\."), "{regex}");
        assert!(regex.ends_with('$'), "{regex}: anchored at the stat's end");
        assert!(regex.len() <= 1024, "Envoy's limit on a tag regex");
    }
}

#[test]
fn the_envoy_filter_applies_where_the_wasm_plugin_runs() {
    let filter = load("envoy-demo/istio/metrics.yaml");
    let plugin = load("envoy-demo/istio/wasmplugin.yaml");
    assert_eq!(
        filter["spec"]["workloadSelector"]["labels"],
        plugin["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(
        filter["metadata"]["namespace"],
        plugin["metadata"]["namespace"]
    );
}

#[test]
fn the_proxies_keep_ratebound_stats() {
    let op = load("envoy-demo/istio-install/metrics-meshconfig.yaml");
    assert_eq!(op["kind"], "IstioOperator");
    let prefixes = op["spec"]["meshConfig"]["defaultConfig"]["proxyStatsMatcher"]
        ["inclusionPrefixes"]
        .as_array()
        .unwrap();
    // A name as the filter defines it and Envoy shows it.
    let stat = ratebound::stats::in_envoy(&ratebound::stats::bound_name(
        "demo",
        "hello",
        "per_address",
        ratebound::stats::Stat::Refused,
    ));
    assert!(
        prefixes
            .iter()
            .any(|p| stat.starts_with(p.as_str().unwrap())),
        "{prefixes:?}"
    );
}

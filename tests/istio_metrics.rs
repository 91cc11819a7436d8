//! The Istio side of ratebound's metrics (envoy-demo/istio/metrics.yaml,
//! metrics-meshconfig.yaml): the custom bootstrap ConfigMap carries exactly
//! the stats tags of envoy-demo/stats-tags.yaml (which
//! tests/e2e/test_prometheus.py runs in a real Envoy, and
//! tests/e2e/test_istiod.py on the bootstrap Istio generates), beside the
//! WasmPlugin, and the proxies keep `wasmcustom.ratebound.` stats.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;

fn load(rel: &str) -> Value {
    let path = format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The custom bootstrap istio-agent hands to Envoy (the pod annotation
/// sidecar.istio.io/bootstrapOverride names the ConfigMap).
fn custom_bootstrap() -> Value {
    let doc = load("envoy-demo/istio/metrics.yaml");
    assert_eq!(doc["kind"], "ConfigMap");
    assert_eq!(doc["metadata"]["name"], "ratebound-bootstrap");
    let text = doc["data"]["custom_bootstrap.json"]
        .as_str()
        .expect("data.custom_bootstrap.json");
    serde_json::from_str(text).unwrap_or_else(|e| panic!("custom_bootstrap.json: {e}"))
}

#[test]
fn the_custom_bootstrap_carries_the_stats_tags_of_stats_tags_yaml() {
    let tags = load("envoy-demo/stats-tags.yaml")["stats_config"]["stats_tags"].clone();
    let patched = custom_bootstrap()["stats_config"]["stats_tags"].clone();
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
fn the_custom_bootstrap_is_beside_the_wasm_plugin() {
    // The annotation names a ConfigMap of the pod's own namespace: the
    // gateway's, which is the WasmPlugin's.
    let map = load("envoy-demo/istio/metrics.yaml");
    let plugin = load("envoy-demo/istio/wasmplugin.yaml");
    assert_eq!(
        map["metadata"]["namespace"],
        plugin["metadata"]["namespace"]
    );
    assert_eq!(
        custom_bootstrap()
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["stats_config"],
        "only the stats tags: nothing else of Istio's bootstrap is overridden"
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

//! Every Istio manifest in envoy-demo/istio: each WasmPlugin's pluginConfig,
//! as Istio hands it to the filter (JSON), passes the same validation as
//! `ratebound check`, with no warning; the other settings are the ones the
//! docs/istio.md explains.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use ratebound::config::parse;
use ratebound::config::plan::Plan;
use ratebound::reading::{warnings, Severity};
use serde_json::Value;

fn manifests() -> Vec<(String, Value)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/envoy-demo/istio");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let doc: Value = serde_saphyr::from_str(&text).unwrap();
        out.push((path.display().to_string(), doc));
    }
    assert!(out.len() >= 3, "manifests: {out:?}");
    out
}

#[test]
fn every_plugin_config_passes_check() {
    let mut plugins = 0;
    for (path, doc) in manifests() {
        if doc["kind"] != "WasmPlugin" {
            continue;
        }
        plugins += 1;
        let spec = &doc["spec"];
        let json = serde_json::to_vec(&spec["pluginConfig"]).unwrap();
        let config = parse(&json).unwrap_or_else(|e| panic!("{path}: {e:?}"));
        let warned: Vec<_> = warnings(&Plan::compile(&config), None)
            .into_iter()
            .filter(|w| w.level == Severity::Warning)
            .collect();
        assert!(warned.is_empty(), "{path}: {warned:?}");
        assert_eq!(
            spec["phase"], "AUTHZ",
            "{path}: JWT claims are visible from AUTHZ on"
        );
        assert_eq!(spec["failStrategy"], "FAIL_RELOAD", "{path}");
        assert_eq!(spec["sha256"], "@SHA256@", "{path}: build.sh fills it in");
    }
    assert!(plugins >= 2);
}

#[test]
fn a_broken_plugin_config_would_be_caught() {
    let (_, doc) = manifests()
        .into_iter()
        .find(|(_, d)| d["kind"] == "WasmPlugin")
        .unwrap();
    let mut config = doc["spec"]["pluginConfig"].clone();
    config["routes"][0]["bounds"][0]["window"] = Value::from("PT0S");
    let errors = parse(&serde_json::to_vec(&config).unwrap()).unwrap_err();
    assert_eq!(errors[0].path, "$.routes[0].bounds[0].window");
}

/// The clusters EnvoyFilters add (applyTo CLUSTER, operation ADD), with the
/// workload labels they apply to.
fn added_clusters() -> Vec<(String, Value, Value)> {
    let mut out = Vec::new();
    for (path, doc) in manifests() {
        if doc["kind"] != "EnvoyFilter" {
            continue;
        }
        let labels = doc["spec"]["workloadSelector"]["labels"].clone();
        for patch in doc["spec"]["configPatches"].as_array().unwrap() {
            if patch["applyTo"] == "CLUSTER" && patch["patch"]["operation"] == "ADD" {
                out.push((
                    path.clone(),
                    patch["patch"]["value"].clone(),
                    labels.clone(),
                ));
            }
        }
    }
    out
}

#[test]
fn the_rate_limit_service_cluster_is_plain_http2_and_where_the_plugin_runs() {
    let clusters = added_clusters();
    assert!(!clusters.is_empty(), "no EnvoyFilter adds a cluster");
    for (path, c, _) in &clusters {
        let name = c["name"].as_str().unwrap_or_default();
        assert!(
            !name.is_empty() && !name.contains('|'),
            "{path}: {name:?}: the name is the call's :authority, no '|'"
        );
        assert_eq!(c["load_assignment"]["cluster_name"], name, "{path}");
        let http = &c["typed_extension_protocol_options"]
            ["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
        assert_eq!(
            http["@type"],
            "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            "{path}"
        );
        assert!(
            http["explicit_http_config"]["http2_protocol_options"].is_object(),
            "{path}: {name}: gRPC needs HTTP/2"
        );
    }
    let mut services = 0;
    for (path, doc) in manifests() {
        if doc["kind"] != "WasmPlugin" {
            continue;
        }
        let service = &doc["spec"]["pluginConfig"]["rate_limit_service"];
        if service.is_null() {
            continue;
        }
        services += 1;
        let labels = &doc["spec"]["selector"]["matchLabels"];
        assert!(
            clusters
                .iter()
                .any(|(_, c, l)| c["name"] == service["cluster"] && l == labels),
            "{path}: no EnvoyFilter adds cluster {} to the workloads {labels}",
            service["cluster"]
        );
    }
    assert!(services >= 1, "no WasmPlugin has a rate_limit_service");
}

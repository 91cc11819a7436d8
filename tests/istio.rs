//! Every Istio manifest in envoy-demo/istio: each WasmPlugin's pluginConfig,
//! as Istio hands it to the filter (JSON), passes the same validation as
//! `ratebound check`, with no warning; the other settings are the ones the
//! README explains.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use ratebound::config::parse;
use ratebound::config::plan::Plan;
use ratebound::console::{warnings, Level};
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
            .filter(|w| w.level == Level::Warning)
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

//! Bytes → `ratebound openapi`'s reading of an OpenAPI document (JSON and
//! YAML) and of a bounds file, then a configuration made from every
//! operation read. Never panics, stays within the document budgets (run
//! with `-rss_limit_mb=2048 -timeout=10`), and a configuration made has
//! one operation per pick, as the document wrote it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ratebound_cli::input::Format;
use ratebound_cli::openapi::{generate, read_document, read_picks, OpenapiRequest};
use ratebound::config::plan::Plan;
use serde_json::{json, Value};

/// Operations picked from one document, at most.
const MAX_PICKS: usize = 64;

fuzz_target!(|data: &[u8]| {
    for format in [Format::Json, Format::Yaml] {
        let _ = read_picks(data, format, "bounds.json");
        let Ok(doc) = read_document(data, format, "spec") else {
            continue;
        };
        let bound = json!([{"per": "address", "limit": 5, "window": "PT1M"}]);
        let picks: Vec<(String, Value)> = doc
            .operations
            .iter()
            .take(MAX_PICKS)
            .map(|o| (format!("{} {}", o.method, o.path), bound.clone()))
            .collect();
        for servers in [false, true] {
            let req = OpenapiRequest {
                route: "fuzzed".into(),
                servers,
                spec_label: "spec".into(),
                bounds_label: "bounds.json".into(),
                ..OpenapiRequest::default()
            };
            let Ok(made) = generate(&doc, &picks, None, &req) else {
                continue;
            };
            let route = made.config.routes.iter().find(|r| r.name == "fuzzed");
            let route = route.expect("the route asked for is in the configuration made");
            assert_eq!(
                route.operations.len(),
                picks.len(),
                "one operation per pick"
            );
            if !servers {
                for (o, (key, _)) in route.operations.iter().zip(&picks) {
                    assert_eq!(&format!("{} {}", o.method, o.path), key);
                }
            }
            let plan = Plan::compile(&made.config);
            assert_eq!(plan.hash, Plan::compile(&made.config).hash);
        }
    }
});

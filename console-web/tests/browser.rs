//! The browser build of the core, in headless Chromium (wasm-bindgen-test):
//! every example and bad example reads exactly as the native core reads it
//! (tests/expected/, checked natively by tests/readings.rs), through the
//! very function the page calls.
#![cfg(target_arch = "wasm32")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

mod cases;

#[wasm_bindgen_test]
fn every_example_reads_as_the_native_core_reads_it() {
    assert!(cases::CASES.len() > 30);
    let mut invalid = 0;
    for (name, config, expected) in cases::CASES {
        let got: Value = serde_json::from_str(&ratebound_console_web::read(config, cases::NODES))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let want: Value = serde_json::from_str(expected).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got, want, "{name}");
        if got["valid"] == false {
            invalid += 1;
        }
    }
    assert!(invalid >= 25, "{invalid}");
}

#[wasm_bindgen_test]
fn a_bad_window_is_said_in_checks_words_in_the_browser() {
    let r: Value = serde_json::from_str(&ratebound_console_web::read(
        r#"{"routes":[{"name":"api","bounds":[{"per":"address","limit":5,"window":"1m"}]}]}"#,
        0,
    ))
    .unwrap();
    assert_eq!(r["valid"], false);
    assert_eq!(
        r["errors"][0]["text"],
        "$.routes[0].bounds[0].window: \"1m\" is not an ISO-8601 duration; write \"PT1M\""
    );
}

#[wasm_bindgen_test]
fn the_pages_forms_are_read_from_the_schema_in_the_browser() {
    let f: Value = serde_json::from_str(&ratebound_console_web::fields("MatchConfig")).unwrap();
    let names: Vec<&str> = f["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["route_name", "host", "path_prefix", "methods"]);
    let s: Value = serde_json::from_str(&ratebound_console_web::fields("SessionSource")).unwrap();
    let on_error = &s["fields"][8];
    assert_eq!(
        (on_error["name"].as_str(), on_error["kind"].as_str()),
        (Some("on_error"), Some("choice"))
    );
    // A bound counted by the service, though not valid yet: the page shows it.
    let r: Value = serde_json::from_str(&ratebound_console_web::read(
        r#"{"routes":[{"name":"a","bounds":[{"per":"route","limit":5,"window":"PT1M","scope":"fleet"}]}]}"#,
        0,
    ))
    .unwrap();
    assert_eq!(
        (r["valid"].as_bool(), r["needs_service"].as_bool()),
        (Some(false), Some(true))
    );
}

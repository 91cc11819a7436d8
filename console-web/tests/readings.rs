//! The browser core's readings of the shipped examples and bad examples,
//! natively: each must equal its expected file (tests/expected/), which
//! tests/browser.rs checks the wasm build against in headless Chromium.
//! So the browser and the native core agree, file by file. The expected
//! files are written with RATEBOUND_BLESS=1; tests/cases.rs (the list the
//! browser test embeds) is written with them and checked here.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use ratebound::reading::explain::explain;
use ratebound::reading::structure;
use ratebound_console_web::reading;
use serde_json::Value;
use std::path::{Path, PathBuf};

const NODES: u32 = 4;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every JSON example and bad example, as (name, path from console-web/).
fn cases() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for dir in ["examples", "bad"] {
        let mut files: Vec<_> = std::fs::read_dir(root().join("filter-config").join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".json"))
            .collect();
        files.sort();
        for f in files {
            out.push((
                format!("{dir}-{}", f.trim_end_matches(".json")),
                format!("../filter-config/{dir}/{f}"),
            ));
        }
    }
    out
}

fn cases_rs(cases: &[(String, String)]) -> String {
    let mut s = String::from(
        "// Written by tests/readings.rs (RATEBOUND_BLESS=1): every JSON example and\n\
         // bad example, with the reading the native core gives it on 4 nodes.\n\
         pub const NODES: u32 = 4;\n\
         pub const CASES: &[(&str, &str, &str)] = &[\n",
    );
    for (name, path) in cases {
        s.push_str(&format!(
            "    (\n        {name:?},\n        include_str!(\"../{path}\"),\n        include_str!(\"expected/{name}.json\"),\n    ),\n"
        ));
    }
    s.push_str("];\n");
    s
}

#[test]
fn the_readings_of_every_example_are_as_expected() {
    let bless = std::env::var_os("RATEBOUND_BLESS").is_some();
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cases = cases();
    assert!(cases.len() > 30, "{cases:?}");
    let mut invalid = 0;
    for (name, path) in &cases {
        let text = std::fs::read_to_string(here.join(path)).unwrap();
        let got = reading(&text, Some(NODES));
        // The reading is `check`'s parse and `explain`'s rows, as they are.
        match structure::parse(text.as_bytes()) {
            Ok(config) => {
                let plan = ratebound::config::plan::Plan::compile(&config);
                let want = serde_json::to_value(explain(&plan, Some(NODES))).unwrap();
                assert_eq!(got["explanation"], want, "{name}");
                assert_eq!(got["valid"], true, "{name}");
            }
            Err(errors) => {
                invalid += 1;
                let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
                let said: Vec<String> = got["errors"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e["text"].as_str().unwrap().to_string())
                    .collect();
                assert_eq!(said, messages, "{name}");
            }
        }
        let expected = here.join("tests/expected").join(format!("{name}.json"));
        if bless {
            std::fs::create_dir_all(expected.parent().unwrap()).unwrap();
            let mut s = serde_json::to_string_pretty(&got).unwrap();
            s.push('\n');
            std::fs::write(&expected, s).unwrap();
        } else {
            let want: Value =
                serde_json::from_str(&std::fs::read_to_string(&expected).unwrap_or_else(|e| {
                    panic!("{}: {e} (RATEBOUND_BLESS=1 writes it)", expected.display())
                }))
                .unwrap();
            assert_eq!(
                got, want,
                "{name}: the reading changed (RATEBOUND_BLESS=1 rewrites)"
            );
        }
    }
    assert!(invalid >= 25, "every bad example is invalid: {invalid}");
    let list = here.join("tests/cases.rs");
    if bless {
        std::fs::write(&list, cases_rs(&cases)).unwrap();
    } else {
        assert_eq!(
            std::fs::read_to_string(&list).unwrap(),
            cases_rs(&cases),
            "tests/cases.rs is out of date (RATEBOUND_BLESS=1 rewrites it)"
        );
    }
}

#[test]
fn typing_changes_the_reading_where_the_number_is() {
    let cfg = |limit: &str| {
        format!(
            r#"{{"routes":[{{"name":"api","bounds":[{{"per":"address","limit":{limit},"window":"PT1M"}}]}}]}}"#
        )
    };
    let r = reading(&cfg("100"), Some(4));
    let row = &r["explanation"]["routes"][0]["phases"][0]["bounds"][0];
    let note = row["warnings"][0]["message"].as_str().unwrap();
    assert!(
        note.contains("on 4 nodes up to 4 × 100 = 400 a minute per client address"),
        "{note}"
    );
    let r = reading(&cfg("\"100\""), Some(4));
    assert_eq!(r["valid"], false);
    assert_eq!(r["errors"][0]["path"], "$.routes[0].bounds[0].limit");
}

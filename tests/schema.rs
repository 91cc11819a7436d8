//! The JSON Schema in filter-config/ is generated from the Rust types and
//! agrees with the parser: the committed file is the generated one, every
//! example passes both, every bad example fails both, and the schema never
//! refuses a window the parser accepts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use ratebound::config::{parse, window_ms};
use ratebound::console::{input, schema, warnings, Level};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const SCHEMA_FILE: &str = "filter-config/ratebound.schema.json";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn validator() -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(&schema::text()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

fn files(dir: &str, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

fn schema_errors(v: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    v.iter_errors(instance).map(|e| e.to_string()).collect()
}

#[test]
fn the_committed_schema_is_the_generated_one() {
    let generated = schema::text();
    let path = root().join(SCHEMA_FILE);
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{SCHEMA_FILE} is stale: run `cargo run --bin ratebound -- schema > {SCHEMA_FILE}` \
         (or UPDATE_SCHEMA=1 cargo test --test schema) and commit it"
    );
}

#[test]
fn every_example_validates_against_the_schema_and_parses_without_warnings() {
    let v = validator();
    let examples = files("filter-config/examples", "json");
    assert!(examples.len() >= 3, "{examples:?}");
    for p in examples {
        let bytes = read(&p);
        let instance: Value = serde_json::from_slice(&bytes).unwrap();
        let errors = schema_errors(&v, &instance);
        assert!(errors.is_empty(), "{}: schema says {errors:?}", p.display());
        let config = parse(&bytes).unwrap_or_else(|e| panic!("{}: {e:?}", p.display()));
        let warned: Vec<_> = warnings(&config, None)
            .into_iter()
            .filter(|w| w.level == Level::Warning)
            .collect();
        assert!(warned.is_empty(), "{}: {warned:?}", p.display());
    }
}

#[test]
fn the_yaml_example_is_the_demo_configuration() {
    let dir = root().join("filter-config/examples");
    let yaml = read(&dir.join("demo.yaml"));
    let from_yaml = input::load(&yaml, input::detect("demo.yaml", &yaml)).unwrap();
    assert_eq!(from_yaml, parse(&read(&dir.join("demo.json"))).unwrap());
}

#[test]
fn every_bad_example_is_rejected_by_the_schema_and_by_the_parser() {
    let v = validator();
    let bad = files("filter-config/bad", "json");
    assert!(bad.len() >= 10, "{bad:?}");
    for p in bad {
        let bytes = read(&p);
        let instance: Value = serde_json::from_slice(&bytes).unwrap();
        assert!(
            !v.is_valid(&instance),
            "{}: the schema accepts it",
            p.display()
        );
        assert!(
            parse(&bytes).is_err(),
            "{}: the parser accepts it",
            p.display()
        );
    }
}

/// What JSON Schema cannot say (ranges of durations, uniqueness by a field,
/// what this build can resolve): the parser alone rejects these. If the
/// schema learns one, move it to filter-config/bad/.
#[test]
fn the_rules_only_the_parser_checks_are_known() {
    let v = validator();
    let bound = |b: Value| json!({"routes": [{"name": "a", "bounds": [b]}]});
    let cases = [
        bound(json!({"per": "address", "limit": 5, "window": "PT0S"})),
        bound(json!({"per": "address", "limit": 5, "window": "PT0.5S"})),
        bound(json!({"per": "address", "limit": 5, "window": "P2D"})),
        bound(json!({"per": "user", "limit": 5, "window": "PT1M"})),
        json!({"routes": [{"name": "a"}, {"name": "a"}]}),
        json!({"routes": [{"name": "a", "bounds": [
            {"name": "x", "per": "route", "limit": 5, "window": "PT1M"},
            {"name": "x", "per": "route", "limit": 9, "window": "PT1M"}]}]}),
    ];
    for c in cases {
        assert!(
            v.is_valid(&c),
            "the schema now rejects {c}: move it to filter-config/bad/"
        );
        assert!(parse(c.to_string().as_bytes()).is_err(), "{c}");
    }
}

fn window_accepted_by_schema(v: &jsonschema::Validator, window: &str) -> bool {
    v.is_valid(&json!({"routes": [{"name": "a", "bounds": [
        {"per": "address", "limit": 5, "window": window}]}]}))
}

#[test]
fn the_schema_accepts_every_window_spelling_the_parser_accepts() {
    let v = validator();
    let numbers = ["1", "10", "0.5", "1,5", "1.", ".5", "1e1", "+1", "-1", "0"];
    let mut accepted = 0;
    for n in numbers {
        for shape in [
            "P{}W",
            "P{}D",
            "PT{}H",
            "PT{}M",
            "PT{}S",
            "P{}DT{}H",
            "PT{}H{}M{}S",
            "PT{}M{}S",
        ] {
            let w = shape.replace("{}", n);
            if window_ms(&w).is_ok() {
                accepted += 1;
                assert!(window_accepted_by_schema(&v, &w), "{w}");
            }
        }
    }
    assert!(accepted > 20, "{accepted}");
    for w in [
        "PT1M", "PT1S", "PT10S", "PT1H", "P1D", "PT90S", "PT1M30S", "P0.5D", "PT0.5H",
    ] {
        assert!(
            window_ms(w).is_ok() && window_accepted_by_schema(&v, w),
            "{w}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]
    #[test]
    fn no_window_the_parser_accepts_is_refused_by_the_schema(w in "P([0-9.,eE+-]{1,4}[YMWD]){0,2}(T([0-9.,eE+-]{1,4}[HMS]){0,3})?") {
        if window_ms(&w).is_ok() {
            prop_assert!(window_accepted_by_schema(&validator(), &w), "{}", w);
        }
    }
}

//! The JSON Schema in filter-config/ is generated from the Rust types and
//! agrees with the parser: the committed file is the generated one, every
//! example passes both, every bad example fails both, and the schema never
//! refuses a window the parser accepts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use ratebound::config::plan::Plan;
use ratebound::config::{parse, window_ms};
use ratebound::reading::{schema, warnings, Severity};
use ratebound_cli::input;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const SCHEMA_FILE: &str = "filter-config/ratebound.schema.json";

/// The repository (this crate is cli/).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn validator() -> &'static jsonschema::Validator {
    // Built once: the property tests ask thousands of times.
    static V: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        let schema: Value = serde_json::from_str(&schema::text()).unwrap();
        jsonschema::validator_for(&schema).unwrap()
    })
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
        let errors = schema_errors(v, &instance);
        assert!(errors.is_empty(), "{}: schema says {errors:?}", p.display());
        let config = parse(&bytes).unwrap_or_else(|e| panic!("{}: {e:?}", p.display()));
        let warned: Vec<_> = warnings(&Plan::compile(&config), None)
            .into_iter()
            .filter(|w| w.level == Severity::Warning)
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

/// What JSON Schema cannot say (uniqueness by a field, what this build can
/// resolve): the parser alone rejects these. If the
/// schema learns one, move it to filter-config/bad/.
#[test]
fn the_rules_only_the_parser_checks_are_known() {
    let v = validator();
    let bound = |b: Value| json!({"routes": [{"name": "a", "bounds": [b]}]});
    let cases = [
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

/// Hosts, session authorities, cookie names and path prefixes that can
/// work, and ones that cannot: the schema and the parser say the same.
#[test]
fn the_schema_and_the_parser_agree_on_hosts_cookies_and_prefixes() {
    let v = validator();
    let agree = |doc: Value, ok: bool, what: &str| {
        assert_eq!(v.is_valid(&doc), ok, "the schema on {what}: {doc}");
        assert_eq!(
            parse(doc.to_string().as_bytes()).is_ok(),
            ok,
            "the parser on {what}: {doc}"
        );
    };
    let hosts = [
        ("example.com", true),
        ("Example.COM.", true),
        ("xn--bcher-kva.example", true),
        ("example.com:8080", true),
        ("example.com:08080", true),
        ("example.com:65535", true),
        ("[::1]", true),
        ("[2001:db8::1]:443", true),
        ("example.com:", false),
        ("example.com:0", false),
        ("example.com:65536", false),
        ("example.com:http", false),
        ("example.com:+80", false),
        ("example.com:80:80", false),
        ("exa mple.com", false),
        ("example.com/api", false),
        ("user@example.com", false),
        (":8080", false),
        ("::1", false),
        ("[::1", false),
        ("[::g]", false),
        ("[::1]x", false),
        ("session\r\nx: 1", false),
        ("", false),
    ];
    for (h, ok) in hosts {
        agree(
            json!({"routes": [{"name": "a", "match": {"host": h}}]}),
            ok,
            "a host",
        );
        agree(
            json!({"identity": {"session": {"cluster": "s", "authority": h}}}),
            ok,
            "an authority",
        );
    }
    for (c, ok) in [
        ("sid", true),
        ("__Host-sid", true),
        ("!#$%&'*+-.^_`|~09AZaz", true),
        ("sid;admin=1", false),
        ("sid=1", false),
        ("s id", false),
        ("sid\u{1}", false),
        ("caf\u{e9}", false),
        ("\"sid\"", false),
        ("", false),
    ] {
        agree(
            json!({"identity": {"session": {"cluster": "s", "cookie": c}}}),
            ok,
            "a cookie name",
        );
    }
    for (p, ok) in [
        ("/api", true),
        ("/", true),
        ("/a%3Fb", true),
        ("/api?v=1", false),
        ("/api#x", false),
        ("/?", false),
        ("api", false),
    ] {
        agree(
            json!({"routes": [{"name": "a", "match": {"path_prefix": p}}]}),
            ok,
            "a path prefix",
        );
    }
}

/// Window spellings and what they are (milliseconds), or `None` when they
/// are no window: the parser and the schema must both say so.
const WINDOWS: &[(&str, Option<u64>)] = &[
    ("PT1S", Some(1_000)),
    ("PT10S", Some(10_000)),
    ("PT59S", Some(59_000)),
    ("PT60S", Some(60_000)),
    ("PT90S", Some(90_000)),
    ("PT86399S", Some(86_399_000)),
    ("PT86400S", Some(86_400_000)),
    ("PT007S", Some(7_000)),
    ("PT1M", Some(60_000)),
    ("PT01M", Some(60_000)),
    ("PT1M0S", Some(60_000)),
    ("PT1M30S", Some(90_000)),
    ("PT59M59S", Some(3_599_000)),
    ("PT90M", Some(5_400_000)),
    ("PT1439M59S", Some(86_399_000)),
    ("PT1440M", Some(86_400_000)),
    ("PT1440M0S", Some(86_400_000)),
    ("PT1H", Some(3_600_000)),
    ("PT1H1S", Some(3_601_000)),
    ("PT1H30M", Some(5_400_000)),
    ("PT1H0M0S", Some(3_600_000)),
    ("PT23H59M59S", Some(86_399_000)),
    ("PT24H", Some(86_400_000)),
    ("PT24H0M", Some(86_400_000)),
    ("PT24H00M0S", Some(86_400_000)),
    ("P1D", Some(86_400_000)),
    ("P01D", Some(86_400_000)),
    ("P1DT0S", Some(86_400_000)),
    ("P1DT0H0M0S", Some(86_400_000)),
    ("P1DT0M", Some(86_400_000)),
    // Issue 12, item 4: components summed as floats.
    ("PT-1M61S", None),
    ("P1DT-23H", None),
    ("PT0.99999999S", None),
    ("PT59.99999999M", None),
    ("PT86400.0001S", None),
    ("P1DT", None),
    // The schema's old pattern took these.
    ("PeW", None),
    ("P-1D", None),
    ("PT1.5S", None),
    // Fractions, even of whole seconds; signs; exponents.
    ("P0.5D", None),
    ("PT0.5H", None),
    ("PT1,5S", None),
    ("PT1.S", None),
    ("PT.5S", None),
    ("PT+1S", None),
    ("PT1e1S", None),
    // Zero, and outside PT1S..P1D.
    ("PT0S", None),
    ("P0D", None),
    ("PT0H0M0S", None),
    ("PT86401S", None),
    ("PT1441M", None),
    ("PT25H", None),
    ("PT24H1S", None),
    ("PT1440M1S", None),
    ("P1DT1S", None),
    ("P2D", None),
    ("PT99999999999999999999999S", None),
    // A later component at or past its carry; a zero first component.
    ("PT1M60S", None),
    ("PT1H60M", None),
    ("PT1H90S", None),
    ("PT0M30S", None),
    ("PT0H1M", None),
    ("P0DT1H", None),
    // Weeks, years, months (also as zero).
    ("P1W", None),
    ("P0W", None),
    ("P1Y", None),
    ("P1M", None),
    ("P0YT1S", None),
    ("P0MT1M", None),
    // Spelling.
    ("pt1m", None),
    ("Pt1M", None),
    ("PT1m", None),
    ("p1d", None),
    ("", None),
    ("P", None),
    ("PT", None),
    ("T1S", None),
    ("1m", None),
    ("PT1", None),
    ("PTS", None),
    ("PT1S1S", None),
    ("PT1S1M", None),
    ("PT1H2H", None),
    ("PT1MT1S", None),
    ("P1DP1D", None),
    (" PT1S", None),
    ("PT1S ", None),
    ("PT\u{661}S", None),
];

#[test]
fn the_schema_and_the_parser_accept_exactly_the_same_windows() {
    let v = validator();
    for (w, want) in WINDOWS {
        assert_eq!(window_ms(w).ok(), *want, "the parser on {w:?}");
        assert_eq!(
            window_accepted_by_schema(v, w),
            want.is_some(),
            "the schema on {w:?}"
        );
    }
}

/// Every combination of parts around the edges (zero, one, the carry, the
/// maximum, one past it), with and without leading zeros.
#[test]
fn the_schema_and_the_parser_agree_at_every_edge() {
    let v = validator();
    let days: &[&str] = &["", "0", "1", "2"];
    let hours: &[&str] = &["", "0", "1", "23", "24", "25"];
    let minutes: &[&str] = &["", "0", "1", "59", "60", "1439", "1440", "1441"];
    let seconds: &[&str] = &["", "0", "1", "59", "60", "86399", "86400", "86401"];
    let (mut accepted, mut all) = (0, 0);
    for d in days {
        for h in hours {
            for m in minutes {
                for s in seconds {
                    for pad in ["", "0"] {
                        let part = |n: &str, u: char| {
                            if n.is_empty() {
                                String::new()
                            } else {
                                format!("{pad}{n}{u}")
                            }
                        };
                        let time = [part(h, 'H'), part(m, 'M'), part(s, 'S')].concat();
                        for t in ["", "T"] {
                            let w = format!(
                                "P{}{}{time}",
                                part(d, 'D'),
                                if time.is_empty() { t } else { "T" }
                            );
                            let ok = window_ms(&w).is_ok();
                            assert_eq!(ok, window_accepted_by_schema(v, &w), "{w}");
                            accepted += usize::from(ok);
                            all += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(
        accepted > 100 && all - accepted > 1_000,
        "{accepted} of {all}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]
    #[test]
    fn the_schema_and_the_parser_agree_on_odd_windows(w in "P([0-9.,eE+-]{1,4}[YMWD]){0,2}(T([0-9.,eE+-]{1,4}[HMS]){0,3})?") {
        prop_assert_eq!(window_ms(&w).is_ok(), window_accepted_by_schema(validator(), &w), "{}", w);
    }

    #[test]
    fn the_schema_and_the_parser_agree_on_plausible_windows(w in "P(0?[0-2]D)?(T(0?[0-9]{1,2}H)?(0?[0-9]{1,4}M)?(0?[0-9]{1,5}S)?)?") {
        prop_assert_eq!(window_ms(&w).is_ok(), window_accepted_by_schema(validator(), &w), "{}", w);
    }
}

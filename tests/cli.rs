//! The real `ratebound` binary: exit statuses, errors with their JSON paths,
//! warnings, --strict, YAML, explain in text and JSON, hostile input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

struct Run {
    code: i32,
    out: String,
    err: String,
}

fn run(args: &[&str], stdin: Option<&[u8]>) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ratebound"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut input = child.stdin.take().unwrap();
        // The binary may stop reading early (it caps its input): ignore EPIPE.
        let _ = input.write_all(stdin.unwrap_or_default());
    }
    let o = child.wait_with_output().unwrap();
    Run {
        code: o.status.code().unwrap(),
        out: String::from_utf8(o.stdout).unwrap(),
        err: String::from_utf8(o.stderr).unwrap(),
    }
}

/// Writes `bytes` to a file named `name` in a scratch directory.
fn file(name: &str, bytes: &[u8]) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_string_lossy().into_owned()
}

const DEMO: &str = "filter-config/examples/demo.json";

/// Warnings of every kind but narrowed-only (not expressible yet).
const WARNED: &str = r#"{"routes":[
  {"name":"health","match":{"path_prefix":"/health"}},
  {"name":"api","match":{"path_prefix":"/api"},"bounds":[
    {"name":"route","per":"route","limit":10,"window":"PT1M"},
    {"name":"addr","per":"address","limit":20,"window":"PT1M"}]},
  {"name":"api_v2","match":{"path_prefix":"/api/v2"},"bounds":[
    {"per":"address","limit":5,"window":"PT1S"}]}]}"#;

#[test]
fn version_names_the_commit() {
    let r = run(&["--version"], None);
    assert_eq!(r.code, 0);
    assert!(
        r.out
            .starts_with(&format!("ratebound {} (git ", env!("CARGO_PKG_VERSION"))),
        "{}",
        r.out
    );
}

#[test]
fn usage_errors_exit_2_with_the_usage() {
    for args in [
        &[][..],
        &["frobnicate"],
        &["check"],
        &["check", "--nodes", "zero", DEMO],
        &["check", "--nodes", "0", DEMO],
        &["check", "--what", DEMO],
        &["explain", "--format", "xml", DEMO],
    ] {
        let r = run(args, None);
        assert_eq!(r.code, 2, "{args:?}: {}", r.err);
        assert!(
            r.err.contains("usage: ratebound check"),
            "{args:?}: {}",
            r.err
        );
        assert!(r.out.is_empty());
    }
    let r = run(&["check", "/nonexistent/ratebound.json"], None);
    assert_eq!(r.code, 2);
    assert!(
        r.err.contains("cannot read /nonexistent/ratebound.json"),
        "{}",
        r.err
    );
    assert_eq!(run(&["--help"], None).code, 0);
}

#[test]
fn a_valid_configuration_exits_0_with_its_cluster_reading() {
    let r = run(&["check", DEMO], None);
    assert_eq!(r.code, 0, "{}", r.out);
    assert!(r.out.contains("note[per-node]: $.routes[0].bounds[0]: per node: each Envoy node counts on its own, so N nodes admit up to N × 5 a minute per client address"), "{}", r.out);
    assert!(
        r.out
            .ends_with("valid (1 route, 1 bound), 0 warnings, 1 note\n"),
        "{}",
        r.out
    );
    let r = run(&["check", "--nodes", "4", DEMO], None);
    assert!(r.out.contains("per node: on 4 nodes up to 4 × 5 = 20 a minute per client address through the installation"), "{}", r.out);
    // Notes never fail --strict.
    assert_eq!(run(&["check", "--strict", DEMO], None).code, 0);
}

#[test]
fn every_error_is_listed_with_its_path_and_what_would_be_valid() {
    let f = file(
        "errors.json",
        br#"{"routes":[{"name":"a b","bounds":[{"per":"address","limit":0,"window":"P2D"}]},
            {"name":"x","match":{"path_prefix":"hello","methods":["get"]}}]}"#,
    );
    let r = run(&["check", &f], None);
    assert_eq!(r.code, 1);
    for want in [
        "error: $.routes[0].name: must be 1-64 characters of A-Z a-z 0-9 _ -",
        "error: $.routes[0].bounds[0].limit: 0 is out of range: a limit is a whole number from 1 to 4294967295",
        "error: $.routes[0].bounds[0].window: \"P2D\" is outside PT1S..P1D",
        "error: $.routes[1].match.path_prefix: \"hello\" must start with '/'",
        "error: $.routes[1].match.methods[0]: \"get\" is not an HTTP method; write it in capitals, e.g. \"GET\"",
    ] {
        assert!(r.out.contains(want), "missing {want:?} in\n{}", r.out);
    }
    assert!(
        r.out.ends_with("errors.json: invalid, 5 errors\n"),
        "{}",
        r.out
    );
}

#[test]
fn warnings_are_printed_and_fail_only_with_strict() {
    let f = file("warned.json", WARNED.as_bytes());
    let r = run(&["check", &f], None);
    assert_eq!(r.code, 0, "{}", r.out);
    for want in [
        "warning[no-bounds]: $.routes[0].bounds: route \"health\" has no bounds",
        "warning[unreachable-bound]: $.routes[1].bounds[1]: bound \"addr\" (20 a minute per client address) never refuses: bound \"route\" (10 a minute for the whole route)",
        "warning[shadowed-route]: $.routes[2].match: route \"api_v2\" never matches: the earlier route \"api\" ($.routes[1])",
    ] {
        assert!(r.out.contains(want), "missing {want:?} in\n{}", r.out);
    }
    assert!(r.out.contains("3 warnings, 3 notes"), "{}", r.out);
    let r = run(&["check", "--strict", &f], None);
    assert_eq!(r.code, 1);
    assert!(
        r.out.ends_with("failing on warnings (--strict)\n"),
        "{}",
        r.out
    );
}

#[test]
fn yaml_is_read_from_files_and_stdin_with_the_same_paths() {
    let r = run(
        &["check", "--strict", "filter-config/examples/demo.yaml"],
        None,
    );
    assert_eq!(r.code, 0, "{}", r.out);
    let yaml = b"routes:\n  - name: a\n    bounds:\n      - per: address\n        limit: 0\n        window: PT1M\n        burst: 1\n";
    let r = run(&["check", "-"], Some(yaml));
    assert_eq!(r.code, 1);
    assert!(r.out.contains("error: $.routes[0].bounds[0]"), "{}", r.out);
    assert!(r.out.contains("unknown field `burst`"), "{}", r.out);
    assert!(
        !r.out.contains(" at line "),
        "JSON locations mean nothing for YAML: {}",
        r.out
    );
    let yaml =
        b"routes:\n  - name: a\n    bounds:\n      - {per: address, limit: 0, window: PT1M}\n";
    let r = run(&["check", "-"], Some(yaml));
    assert!(
        r.out
            .contains("error: $.routes[0].bounds[0].limit: 0 is out of range"),
        "{}",
        r.out
    );
    // JSON on stdin is told by its first character.
    let r = run(&["check", "-"], Some(WARNED.as_bytes()));
    assert_eq!(r.code, 0, "{}", r.out);
    assert!(r.out.contains("3 warnings"));
}

#[test]
fn explain_reads_by_route_and_phase() {
    let r = run(&["explain", "--nodes", "3", DEMO], None);
    assert_eq!(r.code, 0, "{}", r.out);
    let want = "\
ratebound configuration \"demo\": 1 route, 1 bound (on 3 nodes)

route \"hello\"  $.routes[0]
  takes GET requests, path starting with /hello, Envoy route \"hello\"
  before identity (checked on the request headers, before anything is resolved):
    per_address  5 a minute per client address  $.routes[0].bounds[0]
      per node: on 3 nodes up to 3 × 5 = 15 a minute per client address through the installation
  after identity (checked once the caller is known): none

0 warnings, 1 note
";
    assert_eq!(r.out, want);
    let f = file("warned-explain.json", WARNED.as_bytes());
    let r = run(&["explain", &f], None);
    assert_eq!(r.code, 0);
    // The warning sits under the row it concerns.
    let addr = r
        .out
        .find("    addr   20 a minute per client address")
        .unwrap();
    let warn = r
        .out
        .find("      warning[unreachable-bound]: bound \"addr\"")
        .unwrap();
    assert!(warn > addr, "{}", r.out);
    assert!(
        r.out
            .contains("  warning[no-bounds] $.routes[0].bounds: route \"health\""),
        "{}",
        r.out
    );
}

#[test]
fn explain_json_is_for_tools() {
    let r = run(
        &[
            "explain",
            "--format",
            "json",
            "filter-config/examples/several-bounds.json",
        ],
        None,
    );
    assert_eq!(r.code, 0);
    let v: Value = serde_json::from_str(&r.out).unwrap();
    let rows = &v["routes"][0]["phases"][0]["bounds"];
    let words: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["words"].as_str().unwrap())
        .collect();
    assert_eq!(
        words,
        [
            "10 a second per client address",
            "300 a minute per client address",
            "5,000 an hour per client address",
            "50,000 a day per client address",
            "1,000 a second for the whole route"
        ]
    );
    assert_eq!(v["routes"][0]["phases"][1]["phase"], "after-identity");
    assert_eq!(v["summary"]["bounds"], 5);
    let r = run(
        &[
            "explain",
            "--format",
            "json",
            "filter-config/bad/limit-zero.json",
        ],
        None,
    );
    assert_eq!(r.code, 1);
    assert!(
        r.out.contains("error: $.routes[0].bounds[0].limit"),
        "{}",
        r.out
    );
}

#[test]
fn examples_pass_and_bad_examples_fail_through_the_binary() {
    for dir in ["filter-config/examples", "filter-config/bad"] {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path();
            let r = run(&["check", "--strict", p.to_str().unwrap()], None);
            let want = if dir.ends_with("bad") { 1 } else { 0 };
            assert_eq!(r.code, want, "{}: {}", p.display(), r.out);
            if want == 1 {
                assert!(r.out.contains("error: $"), "{}: {}", p.display(), r.out);
            }
        }
    }
}

#[test]
fn the_schema_command_prints_the_committed_schema() {
    let r = run(&["schema"], None);
    assert_eq!(r.code, 0);
    let committed = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("filter-config/ratebound.schema.json"),
    )
    .unwrap();
    assert_eq!(r.out, committed);
}

#[test]
fn hostile_input_is_a_clear_error_never_a_panic() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "latin1.json",
            b"{\"instance\":\"caf\xe9\"}".to_vec(),
            "not UTF-8",
        ),
        ("latin1.yaml", b"instance: caf\xe9\n".to_vec(), "not UTF-8"),
        (
            "huge.json",
            {
                let mut v = b"{\"instance\":\"".to_vec();
                v.extend(std::iter::repeat_n(b'x', 3 << 20));
                v.extend(b"\"}");
                v
            },
            "larger than 1048576 bytes",
        ),
        (
            "deep.json",
            "[".repeat(100_000).into_bytes(),
            "error: $[0]: invalid type",
        ),
        (
            "deep-field.json",
            format!("{{\"routes\":{}", "[".repeat(100_000)).into_bytes(),
            "error: $.routes[0]",
        ),
        (
            "deep.yaml",
            format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes(),
            "not valid YAML",
        ),
        ("bomb.yaml", billion_laughs().into_bytes(), "not valid YAML"),
        ("binary", vec![0u8, 159, 146, 150, 0, 1, 2], "$"),
        (
            "two-docs.yaml",
            b"routes: []\n---\nroutes: []\n".to_vec(),
            "not valid YAML",
        ),
    ];
    for (name, bytes, want) in cases {
        let f = file(name, &bytes);
        for command in ["check", "explain"] {
            let r = run(&[command, &f], None);
            assert_eq!(r.code, 1, "{command} {name}: {}{}", r.out, r.err);
            assert!(
                r.out.contains(want),
                "{command} {name}: want {want:?} in {}",
                r.out
            );
            assert!(!r.err.contains("panicked"), "{command} {name}: {}", r.err);
        }
    }
    // The same through stdin, which is read with the same cap.
    let r = run(&["check", "-"], Some(&vec![b' '; 5 << 20]));
    assert_eq!(r.code, 1);
    assert!(r.out.contains("larger than"), "{}", r.out);
    // An empty file is an empty configuration.
    let r = run(&["check", &file("empty.json", b"")], None);
    assert_eq!(r.code, 0, "{}", r.out);
}

/// Nine levels of ten aliases: a billion "lol"s if expanded.
fn billion_laughs() -> String {
    let mut s = String::from("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for w in names.windows(2) {
        let refs = vec![format!("*{}", w[0]); 10].join(", ");
        s.push_str(&format!("{}: &{} [{refs}]\n", w[1], w[1]));
    }
    s
}

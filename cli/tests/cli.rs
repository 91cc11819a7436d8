//! The real `ratebound` binary: exit statuses, errors with their JSON paths,
//! several files and directories, the checks across them, YAML 1.1, top's q,
//! warnings, --strict, YAML, explain in text and JSON, hostile input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The repository (this crate is cli/): the commands run there, on its files.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

struct Run {
    code: i32,
    out: String,
    err: String,
}

fn run(args: &[&str], stdin: Option<&[u8]>) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ratebound"))
        .args(args)
        .current_dir(root())
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
fn usage_errors_exit_2_with_a_short_usage_not_the_whole_help() {
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
            r.err.contains("Usage: ratebound") || r.err.contains("try '--help'"),
            "{args:?}: {}",
            r.err
        );
        assert!(r.out.is_empty());
    }
    // One error, one usage line, and where to read more: not every command.
    let r = run(&["check", "--what", DEMO], None);
    assert!(
        r.err.contains("error: unexpected argument '--what' found"),
        "{}",
        r.err
    );
    assert!(r
        .err
        .contains("Usage: ratebound check [OPTIONS] <FILE|DIR|->..."));
    assert!(!r.err.contains("openapi"), "{}", r.err);
    assert!(r.err.lines().count() <= 8, "{}", r.err);
    let r = run(&["check", "--nodes", "zero", DEMO], None);
    assert!(
        r.err.contains("a whole number from 1 to 4294967295"),
        "{}",
        r.err
    );
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
fn misspellings_get_a_suggestion() {
    let r = run(&["chekc", DEMO], None);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("'check'"), "{}", r.err);
    let r = run(&["check", "--stirct", DEMO], None);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("--strict"), "{}", r.err);
}

#[test]
fn every_subcommand_has_its_own_help() {
    for (cmd, says) in [
        ("check", "--rls-config <PATH>"),
        ("explain", "--format <FORMAT>"),
        ("rls-config", "envoyproxy/ratelimit"),
        ("openapi", "--match-prefix <P>"),
        ("schema", "JSON Schema"),
        ("completions", "<SHELL>"),
        ("top", "--admin <URL>"),
        ("console", "--listen <ADDRESS:PORT>"),
    ] {
        for args in [vec![cmd, "--help"], vec![cmd, "-h"], vec!["help", cmd]] {
            let r = run(&args, None);
            assert_eq!(r.code, 0, "{args:?}: {}", r.err);
            assert!(
                r.out.contains(&format!("Usage: ratebound {cmd}")),
                "{args:?}: {}",
                r.out
            );
            assert!(r.out.contains(says), "{args:?}: {}", r.out);
        }
    }
    // The global help names every command.
    let r = run(&["help"], None);
    assert_eq!(r.code, 0);
    for cmd in [
        "check",
        "explain",
        "rls-config",
        "openapi",
        "schema",
        "completions",
    ] {
        assert!(r.out.contains(&format!("  {cmd} ")), "{cmd}: {}", r.out);
    }
}

#[test]
fn completions_are_printed_for_each_shell() {
    for (shell, says) in [
        ("bash", "complete -F _ratebound"),
        ("zsh", "#compdef ratebound"),
        ("fish", "complete -c ratebound"),
    ] {
        let r = run(&["completions", shell], None);
        assert_eq!(r.code, 0, "{shell}: {}", r.err);
        assert!(
            r.out.contains(says),
            "{shell}: {}",
            &r.out[..200.min(r.out.len())]
        );
        assert!(r.out.contains("rls-config"), "{shell}");
    }
    assert_eq!(run(&["completions", "cmd.exe"], None).code, 2);
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
client addresses are counted per IPv4 address and per IPv6 /64 network  $.client_address

route \"hello\"  $.routes[0]
  takes GET requests, path starting with /hello, Envoy route \"hello\"
  before identity (checked on the request headers, before anything is resolved):
    per_address  on 3 nodes: up to 3 × 5 = 15 a minute per client address  $.routes[0].bounds[0]
  after identity (checked once the caller is known): none

0 warnings, 1 note; --verbose for each bound's full reading
";
    assert_eq!(r.out, want);
    // The full statement under the line with --verbose.
    let r = run(&["explain", "--nodes", "3", "--verbose", DEMO], None);
    assert_eq!(r.code, 0, "{}", r.out);
    assert!(
        r.out.contains(
            "
    per_address  on 3 nodes: up to 3 × 5 = 15 a minute per client address  $.routes[0].bounds[0]
      5 a minute per client address
      per node: on 3 nodes up to 3 × 5 = 15 a minute per client address through the installation
  after identity"
        ),
        "{}",
        r.out
    );
    assert!(r.out.ends_with("\n0 warnings, 1 note\n"), "{}", r.out);
    let f = file("warned-explain.json", WARNED.as_bytes());
    let r = run(&["explain", &f], None);
    assert_eq!(r.code, 0);
    // The warning sits under the row it concerns.
    let addr = r
        .out
        .find("    addr   per node: 20 a minute per client address; N nodes admit N × 20")
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

/// Tiers on one key: explain and check say which bounds share one entry
/// (one write a request) and, verbose, why a bound on the same key keeps
/// its own.
const TIERS: &str = r#"{"instance":"shop","routes":[{"name":"api","bounds":[
  {"name":"second","per":"address","limit":10,"window":"PT1S"},
  {"name":"minute","per":"address","limit":300,"window":"PT1M"},
  {"name":"hour","per":"address","limit":5000,"window":"PT1H"},
  {"name":"trial","per":"address","limit":20,"window":"PT1M","shadow":true}]}]}"#;

#[test]
fn explain_and_check_say_which_bounds_share_one_entry() {
    let f = file("tiers.json", TIERS.as_bytes());
    let r = run(&["explain", &f], None);
    assert_eq!(r.code, 0, "{}", r.err);
    let want = "\
    trial   shadow, per node: 20 a minute per client address; N nodes admit N × 20  $.routes[0].bounds[3]
  after identity (checked once the caller is known): none
  `second`, `minute` and `hour` share one entry per client address (one write a request for the 3)
";
    assert!(r.out.contains(want), "{}", r.out);
    let r = run(&["explain", "--verbose", &f], None);
    assert!(
        r.out.contains(
            "
    minute  per node: 300 a minute per client address; N nodes admit N × 300  $.routes[0].bounds[1]
      300 a minute per client address
      per node: each Envoy node counts on its own, so N nodes admit up to N × 300 a minute per
        client address through the installation
      shares one entry per client address with `second` and `hour`: the 3 tiers are read once and
        written by one compare-and-swap a request
"
        ),
        "{}",
        r.out
    );
    assert!(
        r.out.contains(
            "      its own entry (its own write): a shadow bound is counted apart from the bounds that refuse\n"
        ),
        "{}",
        r.out
    );
    let j: Value =
        serde_json::from_str(&run(&["explain", "--format", "json", &f], None).out).unwrap();
    assert_eq!(
        j["routes"][0]["phases"][0]["bounds"][3]["sharing"],
        "its own entry (its own write): a shadow bound is counted apart from the bounds that refuse"
    );
    let r = run(&["check", &f], None);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(
        r.out.contains(&format!(
            "{f}: route \"api\": `second`, `minute` and `hour` share one entry per client address \
             (one write a request for the 3)\n"
        )),
        "{}",
        r.out
    );
    let j: Value =
        serde_json::from_str(&run(&["check", "--format", "json", &f], None).out).unwrap();
    let doc = &j["files"][0]["documents"][0];
    assert_eq!(doc["shared_entries"][0]["route"], "api", "{j}");
    // A route's only bound shares nothing and says nothing of it.
    let r = run(&["explain", "--verbose", DEMO], None);
    assert!(!r.out.contains("entry"), "{}", r.out);
}

#[test]
fn explain_says_a_fleet_bound_in_one_line_and_its_paragraph_with_verbose() {
    let fleet = "filter-config/examples/fleet.json";
    let r = run(&["explain", "--nodes", "3", fleet], None);
    assert_eq!(r.code, 0, "{}", r.out);
    assert!(
        r.out.contains(
            "    per_address  on 3 nodes: one budget of 300 a minute per client address; up to ~323 in a burst  $.routes[0].bounds[0]\n    burst  "
        ),
        "{}",
        r.out
    );
    assert!(!r.out.contains("reconciles"), "{}", r.out);
    let r = run(&["explain", "--nodes", "3", "-v", fleet], None);
    assert_eq!(r.code, 0, "{}", r.out);
    let under = r
        .out
        .split("  $.routes[0].bounds[0]\n")
        .nth(1)
        .unwrap_or_default();
    assert!(
        under.starts_with(
            "      300 a minute per client address\n      fleet: one budget of 300 a minute per client address for all nodes together,"
        ),
        "{}",
        r.out
    );
    assert!(
        under.contains("on 3 nodes admitting 1.7 a second each: about 4 over"),
        "{}",
        r.out
    );
    for l in r.out.lines().filter(|l| !l.contains("  $.")) {
        assert!(l.chars().count() <= 100, "{l:?}");
    }
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
    // The line and the full statement, both.
    assert_eq!(
        rows[0]["line"],
        "per node: 10 a second per client address; N nodes admit N × 10"
    );
    assert!(
        rows[0]["detail"]
            .as_str()
            .unwrap()
            .starts_with("10 a second per client address\nper node: each Envoy node counts"),
        "{}",
        rows[0]
    );
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
    // Still JSON on stdout: the errors, where they are.
    let v: Value = serde_json::from_str(&r.out).unwrap();
    assert_eq!(v["valid"], false);
    let e = &v["documents"][0]["errors"][0];
    assert_eq!(e["path"], "$.routes[0].bounds[0].limit");
    assert!(e["line"].as_u64().is_some(), "{e}");
}

#[test]
fn examples_pass_and_bad_examples_fail_through_the_binary() {
    for dir in ["filter-config/examples", "filter-config/bad"] {
        let root = root();
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
    let committed =
        std::fs::read_to_string(root().join("filter-config/ratebound.schema.json")).unwrap();
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
            "error: $: not valid JSON: recursion limit exceeded",
        ),
        (
            "deep-field.json",
            format!("{{\"routes\":{}", "[".repeat(100_000)).into_bytes(),
            "error: $: not valid JSON",
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
            "no ratebound configuration here",
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

const SHOP: &str = "filter-config/openapi/shop.json";
const SHOP_BOUNDS: &str = "filter-config/openapi/shop-bounds.json";
const SHOP_BASE: &str = "filter-config/openapi/shop-base.json";
const PETSTORE: &str = "filter-config/openapi/petstore.yaml";
const PETSTORE_BOUNDS: &str = "filter-config/openapi/petstore-bounds.yaml";

fn openapi(spec: &str, bounds: &str, extra: &[&str]) -> Run {
    let mut args = vec!["openapi", spec, "--route", "shop", "--bounds", bounds];
    args.extend_from_slice(extra);
    run(&args, None)
}

#[test]
fn openapi_makes_the_committed_shop_example_from_a_json_document() {
    let r = openapi(SHOP, SHOP_BOUNDS, &["--config", SHOP_BASE, "--servers"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let committed =
        std::fs::read_to_string(root().join("filter-config/examples/shop-operations.json"))
            .unwrap();
    assert_eq!(
        r.out, committed,
        "regenerate filter-config/examples/shop-operations.json (see docs/per-endpoint.md)"
    );
    assert!(
        r.err.ends_with(
            "route \"shop\" with 5 operations from filter-config/openapi/shop.json (OpenAPI 3.1.0), 0 warnings\n"
        ),
        "{}",
        r.err
    );
    let v: Value = serde_json::from_str(&r.out).unwrap();
    let route = &v["routes"][0];
    assert_eq!(
        route["bounds"].as_array().unwrap().len(),
        2,
        "the base's bounds are kept"
    );
    let ops: Vec<String> = route["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            format!(
                "{} {}",
                o["method"].as_str().unwrap(),
                o["path"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        ops,
        [
            "POST /api/orders/{orderId}/pay",
            "POST /api/auth/login",
            "POST /api/auth/password-reset",
            "GET /api/orders/mine",
            "POST /api/products/{productId}/reviews",
        ],
        "only the operations picked, in the bounds file's order, under the servers' /api"
    );
    // Without --servers, paths are as the document writes them.
    let r = openapi(SHOP, SHOP_BOUNDS, &["--config", SHOP_BASE]);
    assert_eq!(r.code, 0, "{}", r.err);
    let v: Value = serde_json::from_str(&r.out).unwrap();
    assert_eq!(
        v["routes"][0]["operations"][0]["path"],
        "/orders/{orderId}/pay"
    );
    // ... which the route's /api prefix never takes: said on stderr.
    assert!(
        r.err.contains("warning[unreachable-operation]: $.routes[0].operations[0].path: operation POST /orders/{orderId}/pay (payOrder) never matches"),
        "{}",
        r.err
    );
}

#[test]
fn openapi_reads_a_yaml_document_and_a_yaml_bounds_file() {
    let r = run(
        &[
            "openapi",
            PETSTORE,
            "--route",
            "pets",
            "--bounds",
            PETSTORE_BOUNDS,
        ],
        None,
    );
    assert_eq!(r.code, 0, "{}", r.err);
    let v: Value = serde_json::from_str(&r.out).unwrap();
    let route = &v["routes"][0];
    assert_eq!(route["name"], "pets");
    assert_eq!(route["match"]["path_prefix"], "/pets");
    let ids: Vec<&str> = route["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["operation_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["createPets", "showPetById", "adoptPet", "getPetPhoto"]
    );
    assert_eq!(route["operations"][1]["path"], "/pets/{petId}");
    assert_eq!(
        route["operations"][3]["path"],
        "/pets/{petId}/photos/{photoId}.jpg"
    );
    assert!(
        r.err
            .contains("note: route \"pets\" is new: it takes paths starting with /pets"),
        "{}",
        r.err
    );
    assert!(r.err.contains("warning[no-bounds]"), "{}", r.err);
    // What it prints is a configuration `check` accepts.
    let c = run(&["check", "-"], Some(r.out.as_bytes()));
    assert_eq!(c.code, 0, "{}", c.out);
    assert!(
        c.out.contains("valid (1 route, 0 bounds, 4 operations)"),
        "{}",
        c.out
    );
    // --match-prefix chooses the new route's prefix.
    let r = run(
        &[
            "openapi",
            PETSTORE,
            "--route",
            "pets",
            "--bounds",
            PETSTORE_BOUNDS,
            "--match-prefix",
            "/",
        ],
        None,
    );
    let v: Value = serde_json::from_str(&r.out).unwrap();
    assert_eq!(v["routes"][0]["match"]["path_prefix"], "/");
}

#[test]
fn openapi_names_every_wrong_pick_and_writes_nothing() {
    let doc = file(
        "dup-ids.yaml",
        b"openapi: 3.1.0\npaths:\n  /a:\n    get: {operationId: same}\n  /b:\n    get: {operationId: same}\n  /orders/{id}:\n    get: {operationId: getOrder}\n",
    );
    let cases: [(&str, &str, &str, &str); 5] = [
        (
            SHOP,
            r#"{"payOrders":[{"per":"address","limit":5,"window":"PT1M"}]}"#,
            "unknown-id.json",
            "unknown-id.json \"payOrders\": no operation of filter-config/openapi/shop.json has operationId",
        ),
        (
            &doc,
            r#"{"same":[{"per":"address","limit":5,"window":"PT1M"}]}"#,
            "dup-id.json",
            "operationId \"same\" occurs 2 times in",
        ),
        (
            SHOP,
            r#"{"GET /orders/{id}/pay":[{"per":"address","limit":5,"window":"PT1M"}]}"#,
            "no-such-route.json",
            "shop.json has no GET /orders/{id}/pay: that path has POST",
        ),
        (
            &doc,
            r#"{"getOrder":[{"per":"address","limit":5,"window":"PT1M"}],
                "GET /orders/{orderId}":[{"per":"address","limit":9,"window":"PT1M"}]}"#,
            "twice.json",
            "\"GET /orders/{orderId}\": picks GET /orders/{id} (getOrder), which \"getOrder\" already picks",
        ),
        (
            SHOP,
            r#"{"payOrder":[{"per":"address","limit":0,"window":"PT1M"}]}"#,
            "bad-bound.json",
            "\"payOrder\"[0].limit: 0 is out of range",
        ),
    ];
    for (spec, bounds, name, want) in cases {
        let b = file(name, bounds.as_bytes());
        let r = openapi(spec, &b, &[]);
        assert_eq!(r.code, 1, "{name}: {}", r.err);
        assert!(r.out.is_empty(), "{name}: {}", r.out);
        assert!(r.err.contains(want), "{name}: want {want:?} in\n{}", r.err);
        assert!(
            r.err.contains("no configuration written"),
            "{name}: {}",
            r.err
        );
    }
    // The unknown id is named against the bounds file, with a suggestion.
    let b = file("unknown-id.json", cases[0].1.as_bytes());
    let r = openapi(SHOP, &b, &[]);
    assert!(r.err.contains("no operation of filter-config/openapi/shop.json has operationId \"payOrders\"; did you mean \"payOrder\"?"), "{}", r.err);
    // Every problem at once.
    let b = file(
        "all-wrong.json",
        br#"{"nope":[{"per":"address","limit":5,"window":"PT1M"}],"GET /nowhere":[{"per":"address","limit":5,"window":"PT1M"}]}"#,
    );
    let r = openapi(SHOP, &b, &[]);
    assert!(r.err.contains(", 2 errors\n"), "{}", r.err);
    // A per-user bound needs the base's identity.
    let b = file(
        "per-user.json",
        br#"{"payOrder":[{"per":"user","limit":5,"window":"PT1M"}]}"#,
    );
    let r = openapi(SHOP, &b, &[]);
    assert_eq!(r.code, 1);
    assert!(
        r.err
            .contains("\"payOrder\"[0].per: needs a caller identity"),
        "{}",
        r.err
    );
    assert_eq!(openapi(SHOP, &b, &["--config", SHOP_BASE]).code, 0);
    // An invalid base is told as such.
    let r = openapi(
        SHOP,
        SHOP_BOUNDS,
        &["--config", "filter-config/bad/limit-zero.json"],
    );
    assert_eq!(r.code, 1);
    assert!(
        r.err
            .contains("the base configuration (--config) is invalid"),
        "{}",
        r.err
    );
    // Usage and unreadable files.
    assert_eq!(run(&["openapi", SHOP, "--route", "shop"], None).code, 2);
    assert_eq!(
        openapi("/nonexistent/openapi.json", SHOP_BOUNDS, &[]).code,
        2
    );
}

#[test]
fn openapi_documents_that_are_hostile_are_errors_never_panics() {
    let bounds = file(
        "hostile-bounds.json",
        br#"{"x":[{"per":"address","limit":5,"window":"PT1M"}]}"#,
    );
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "h-latin1.json",
            b"{\"openapi\":\"3.1.0\",\"x\":\"caf\xe9\"}".to_vec(),
            "not UTF-8",
        ),
        (
            "h-deep.json",
            format!("{{\"openapi\":\"3.1.0\",\"x\":{}", "[".repeat(100_000)).into_bytes(),
            "not an OpenAPI document this can read",
        ),
        (
            "h-deep.yaml",
            format!(
                "openapi: 3.1.0\nx: {}1{}\n",
                "[".repeat(100_000),
                "]".repeat(100_000)
            )
            .into_bytes(),
            "not an OpenAPI document this can read",
        ),
        (
            "h-bomb.yaml",
            format!("openapi: 3.1.0\n{}", billion_laughs()).into_bytes(),
            "not an OpenAPI document this can read",
        ),
        (
            "h-huge.json",
            {
                let mut v = b"{\"openapi\":\"3.1.0\",\"x\":\"".to_vec();
                v.extend(std::iter::repeat_n(b'x', 17 << 20));
                v.extend(b"\"}");
                v
            },
            "larger than 16777216 bytes",
        ),
        (
            "h-swagger.json",
            br#"{"swagger":"2.0","paths":{}}"#.to_vec(),
            "Swagger 2.0",
        ),
        (
            "h-not-openapi.yaml",
            b"routes: []\n".to_vec(),
            "no \"openapi\" version field",
        ),
    ];
    for (name, bytes, want) in cases {
        let f = file(name, &bytes);
        let r = openapi(&f, &bounds, &[]);
        assert_eq!(r.code, 1, "{name}: {}", r.err);
        assert!(r.err.contains(want), "{name}: want {want:?} in {}", r.err);
        assert!(!r.err.contains("panicked"), "{name}: {}", r.err);
        assert!(r.out.is_empty());
    }
    // A hostile bounds file, likewise.
    let b = file("h-bounds-bomb.yaml", billion_laughs().as_bytes());
    let r = openapi(SHOP, &b, &[]);
    assert_eq!(r.code, 1, "{}", r.err);
    assert!(r.err.contains("not valid YAML"), "{}", r.err);
}

#[test]
fn explain_shows_operations_under_their_route_with_the_counter_count() {
    let r = run(
        &["explain", "filter-config/examples/shop-operations.json"],
        None,
    );
    assert_eq!(r.code, 0, "{}", r.out);
    for want in [
        "ratebound configuration \"shop\": 1 route, 2 bounds, 5 operations with 6 bounds (counted per Envoy node)\n",
        "    payOrder.per_user                         POST /api/orders/{orderId}/pay (payOrder): per node: 5 a minute per user, per operation; N nodes admit N × 5  $.routes[0].operations[0].bounds[0]\n",
        "    requestPasswordReset.all  POST /api/auth/password-reset (requestPasswordReset): per node: 20 a minute for the whole operation; N nodes admit N × 20",
        "  5 operations, up to 50,001 counters (5 keyed bounds × 10,000 callers + 1 counter for a whole operation):\n",
    ] {
        assert!(r.out.contains(want), "missing {want:?} in\n{}", r.out);
    }
    // Operation bounds that need no identity are checked before it.
    let before = r.out.find("  before identity").unwrap();
    let after = r.out.find("  after identity").unwrap();
    let login = r.out.find("login.per_address ").unwrap();
    let pay = r.out.find("payOrder.per_user ").unwrap();
    assert!(before < login && login < after && after < pay, "{}", r.out);
    let r = run(
        &[
            "explain",
            "--format",
            "json",
            "filter-config/examples/shop-operations.json",
        ],
        None,
    );
    let v: Value = serde_json::from_str(&r.out).unwrap();
    assert_eq!(v["routes"][0]["counters"]["total"], 50_001);
    assert_eq!(
        v["routes"][0]["operations"][0]["title"],
        "POST /api/orders/{orderId}/pay (payOrder)"
    );
    assert_eq!(v["summary"]["operations"], 5);
    assert_eq!(v["summary"]["operation_bounds"], 6);
}

#[test]
fn check_says_how_much_of_the_key_budget_a_configuration_uses_and_refuses_more() {
    let bounds = |n: usize| {
        let b: Vec<String> = (0..n)
            .map(|j| format!(r#"{{"name":"b{j}","per":"address","limit":5,"window":"PT1M"}}"#))
            .collect();
        format!(
            r#"{{"routes":[{{"name":"r","bounds":[{}]}}]}}"#,
            b.join(",")
        )
    };
    let r = run(&["check", "-"], Some(bounds(128).as_bytes()));
    assert_eq!(r.code, 0, "{}{}", r.out, r.err);
    assert!(
        r.out
            .contains("-: 160,256 of the 161,280 shared-data keys one configuration may use"),
        "{}",
        r.out
    );
    let r = run(&["check", "-"], Some(bounds(129).as_bytes()));
    assert_eq!(r.code, 1, "{}{}", r.out, r.err);
    assert!(
        r.out
            .contains("error: $.routes: 129 bounds keyed per caller need 161508 shared-data keys"),
        "{}",
        r.out
    );
}

const SIGN_IN: &str = r#"{"instance":"signin",
  "rate_limit_service":{"cluster":"rls","domain":"signin","key_secret":{"env":"RB_SECRET"}},
  "routes":[{"name":"login","match":{"methods":["POST"]},"account":{"json":"username"},"bounds":[
    {"name":"addr","per":"address","limit":30,"window":"PT1M"},
    {"name":"attempts","per":"account","scope":"installation","limit":5,"window":"PT1M"}]}]}"#;

#[test]
fn a_sign_in_route_without_a_secret_or_a_method_is_warned_about() {
    let loose = SIGN_IN
        .replace(r#","key_secret":{"env":"RB_SECRET"}"#, "")
        .replace(r#""match":{"methods":["POST"]},"#, "");
    let cfg = file("signin-loose.json", loose.as_bytes());
    let r = run(&["check", "--strict", &cfg], None);
    assert_eq!(r.code, 1, "{}", r.out);
    assert!(
        r.out
            .contains("warning[no-key-secret]: $.rate_limit_service"),
        "{}",
        r.out
    );
    assert!(
        r.out
            .contains("warning[sign-in-any-method]: $.routes[0].match"),
        "{}",
        r.out
    );
    let r = run(
        &[
            "check",
            "--strict",
            &file("signin.json", SIGN_IN.as_bytes()),
        ],
        None,
    );
    assert_eq!(r.code, 0, "{}", r.out);
}

#[test]
fn rls_config_prints_the_services_configuration_and_check_compares_it() {
    let cfg = file("signin.json", SIGN_IN.as_bytes());
    let r = run(&["rls-config", &cfg], None);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.out.contains("domain: signin\n"), "{}", r.out);
    assert!(r.out.contains("value: login.attempts\n"), "{}", r.out);
    assert!(!r.out.contains("addr"), "node bounds are not the service's");
    let same = file("rls-same.yaml", r.out.as_bytes());
    let r = run(&["check", "--strict", "--rls-config", &same, &cfg], None);
    assert_eq!(r.code, 0, "{}{}", r.out, r.err);
    assert!(r.out.contains("note[installation]"), "{}", r.out);
    let other = file(
        "rls-other.yaml",
        r#"{"domain":"other","descriptors":[]}"#.as_bytes(),
    );
    let r = run(&["check", "--strict", "--rls-config", &other, &cfg], None);
    assert_eq!(r.code, 1, "{}", r.out);
    assert!(r.out.contains("admit everything"), "{}", r.out);
    // The same file in the ConfigMap the service's manifest mounts, under
    // a key named after the domain, indented as a literal block.
    let plain = run(&["rls-config", &cfg], None).out;
    let r = run(&["rls-config", "--format", "configmap", &cfg], None);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(
        r.out.starts_with("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ratelimit-config\n  namespace: ratelimit\n"),
        "{}",
        r.out
    );
    let (_, block) = r.out.split_once("data:\n  signin.yaml: |\n").unwrap();
    let unindented: String = block
        .lines()
        .map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l)))
        .collect();
    assert_eq!(unindented, plain);
    // Without a rate_limit_service there is nothing to generate.
    let r = run(&["rls-config", DEMO], None);
    assert_eq!(r.code, 1);
    assert!(r.err.contains("no rate_limit_service"), "{}", r.err);
}

/// The ConfigMaps of a `rls-config --format configmap` output, by name:
/// (its domain key, the file under it, unindented).
fn configmaps(out: &str) -> Vec<(String, String, String)> {
    out.split("---\n")
        .map(|doc| {
            let name = doc
                .split_once("metadata:\n  name: ")
                .and_then(|(_, r)| r.lines().next())
                .unwrap()
                .to_string();
            let (_, block) = doc.split_once("\ndata:\n  ").unwrap();
            let (key, body) = block.split_once(": |\n").unwrap();
            let body: String = body
                .lines()
                .map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l)))
                .collect();
            (name, key.to_string(), body)
        })
        .collect()
}

#[test]
fn rls_config_gives_each_domain_its_own_configmap() {
    let signin = file("multi-signin.json", SIGN_IN.as_bytes());
    let api = file(
        "multi-api.json",
        SIGN_IN
            .replace(r#""domain":"signin""#, r#""domain":"api""#)
            .replace(r#""limit":5,"#, r#""limit":7,"#)
            .as_bytes(),
    );
    let alone = |f: &str| run(&["rls-config", f], None).out;
    // Several configurations: one ConfigMap each, named after its domain,
    // each holding exactly what the one-file form prints for it.
    let r = run(
        &["rls-config", "--format", "configmap", &signin, &api],
        None,
    );
    assert_eq!(r.code, 0, "{}", r.err);
    let maps = configmaps(&r.out);
    assert_eq!(
        maps,
        vec![
            (
                "ratelimit-config-signin".to_string(),
                "signin.yaml".to_string(),
                alone(&signin)
            ),
            (
                "ratelimit-config-api".to_string(),
                "api.yaml".to_string(),
                alone(&api)
            ),
        ]
    );
    assert!(
        maps[1].2.contains("requests_per_unit: 7\n"),
        "{}",
        maps[1].2
    );
    // Deployed one at a time, with a name each: the second does not replace
    // the first (distinct names), and the one-file form keeps its name.
    let first = run(&["rls-config", "--format", "configmap", &signin], None).out;
    let second = run(
        &[
            "rls-config",
            "--format",
            "configmap",
            "--name",
            "ratelimit-config-api",
            &api,
        ],
        None,
    );
    assert_eq!(second.code, 0, "{}", second.err);
    let (a, b) = (&configmaps(&first)[0], &configmaps(&second.out)[0]);
    assert_eq!(a.0, "ratelimit-config");
    assert_eq!(b.0, "ratelimit-config-api");
    assert_eq!((a.1.as_str(), b.1.as_str()), ("signin.yaml", "api.yaml"));
    // --name per file, in order.
    let r = run(
        &[
            "rls-config",
            "--format=configmap",
            &api,
            &signin,
            "--name",
            "rl-api",
            "--name",
            "rl-signin",
        ],
        None,
    );
    assert_eq!(r.code, 0, "{}", r.err);
    let names: Vec<_> = configmaps(&r.out).into_iter().map(|m| (m.0, m.1)).collect();
    assert_eq!(
        names,
        vec![
            ("rl-api".to_string(), "api.yaml".to_string()),
            ("rl-signin".to_string(), "signin.yaml".to_string())
        ]
    );
}

#[test]
fn rls_config_refuses_two_configurations_of_one_domain_and_names_the_fix() {
    let a = file("dup-a.json", SIGN_IN.as_bytes());
    let b = file(
        "dup-b.json",
        SIGN_IN
            .replace(r#""instance":"signin""#, r#""instance":"other""#)
            .as_bytes(),
    );
    let r = run(&["rls-config", "--format", "configmap", &a, &b], None);
    assert_eq!(r.code, 1, "{}", r.out);
    assert!(r.out.is_empty(), "nothing to apply: {}", r.out);
    assert!(
        r.err
            .contains(&format!("{a} and {b} both have the domain \"signin\"")),
        "{}",
        r.err
    );
    assert!(
        r.err
            .contains("give each filter configuration its own rate_limit_service.domain"),
        "{}",
        r.err
    );
    // The YAML form reads one file; a --name needs a ConfigMap.
    let r = run(&["rls-config", &a, &b], None);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("use --format configmap"), "{}", r.err);
    let r = run(&["rls-config", "--name", "x", &a], None);
    assert_eq!(r.code, 2);
    // One name for two files.
    let api = file(
        "dup-api.json",
        SIGN_IN
            .replace(r#""domain":"signin""#, r#""domain":"api""#)
            .as_bytes(),
    );
    let r = run(
        &[
            "rls-config",
            "--format",
            "configmap",
            "--name",
            "x",
            &a,
            &api,
        ],
        None,
    );
    assert_eq!(r.code, 1);
    assert!(
        r.err.contains("give one --name per configuration"),
        "{}",
        r.err
    );
    // A file without a service among several: said, nothing printed.
    let r = run(&["rls-config", "--format", "configmap", &a, DEMO], None);
    assert_eq!(r.code, 1);
    assert!(
        r.out.is_empty() && r.err.contains("no rate_limit_service"),
        "{}",
        r.err
    );
}

#[test]
fn an_installation_bound_without_a_service_or_with_an_odd_window_is_an_error() {
    let no_service = SIGN_IN.replace(
        r#""rate_limit_service":{"cluster":"rls","domain":"signin","key_secret":{"env":"RB_SECRET"}},"#,
        "",
    );
    let r = run(&["check", "-"], Some(no_service.as_bytes()));
    assert_eq!(r.code, 1);
    assert!(r.out.contains("$.routes[0].bounds[1].scope"), "{}", r.out);
    let odd = SIGN_IN.replace(
        r#""limit":5,"window":"PT1M""#,
        r#""limit":5,"window":"PT2M""#,
    );
    let r = run(&["check", "-"], Some(odd.as_bytes()));
    assert_eq!(r.code, 1);
    assert!(r.out.contains("$.routes[0].bounds[1].window"), "{}", r.out);
    assert!(r.out.contains(r#"the nearest is "PT1M""#), "{}", r.out);
}

const PLUGIN: &str = "envoy-demo/istio/wasmplugin.yaml";

#[test]
fn check_and_explain_read_the_wasm_plugin_that_ships() {
    let r = run(&["check", "--strict", PLUGIN], None);
    assert_eq!(r.code, 0, "{}{}", r.out, r.err);
    assert!(
        r.out.ends_with(
            "wasmplugin.yaml (WasmPlugin istio-system/ratebound, document 1): valid (1 route, 1 bound), 0 warnings, 1 note\n"
        ),
        "{}",
        r.out
    );
    let r = run(&["explain", PLUGIN], None);
    assert_eq!(r.code, 0, "{}{}", r.out, r.err);
    assert!(
        r.out.contains("ratebound configuration \"demo\""),
        "{}",
        r.out
    );
    // An error in the pluginConfig is told at its line in the manifest.
    let text = std::fs::read_to_string(root().join(PLUGIN))
        .unwrap()
        .replace("limit: 5", "limit: 0");
    let line = text.lines().position(|l| l.contains("limit: 0")).unwrap() + 1;
    let f = file("wasmplugin-bad.yaml", text.as_bytes());
    let r = run(&["check", &f], None);
    assert_eq!(r.code, 1);
    assert!(
        r.out
            .contains("error: $.routes[0].bounds[0].limit: 0 is out of range"),
        "{}",
        r.out
    );
    assert!(
        r.out.contains(&format!("wasmplugin-bad.yaml:{line}:16")),
        "{}",
        r.out
    );
}

#[test]
fn a_stream_of_documents_checks_each_wasm_plugin_and_skips_the_rest() {
    let plugin = std::fs::read_to_string(root().join(PLUGIN)).unwrap();
    let second = plugin
        .replace("name: ratebound", "name: second")
        .replace("limit: 5", "limit: 0");
    let stream = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n---\n{plugin}---\n{second}"
    );
    let f = file("kustomized.yaml", stream.as_bytes());
    let r = run(&["check", &f], None);
    assert_eq!(r.code, 1, "{}", r.out);
    assert!(
        r.out
            .contains("document 1: Namespace shop skipped, not a WasmPlugin"),
        "{}",
        r.out
    );
    assert!(
        r.out
            .contains("(WasmPlugin istio-system/ratebound, document 2): valid"),
        "{}",
        r.out
    );
    assert!(
        r.out
            .contains("(WasmPlugin istio-system/second, document 3): invalid, 1 error"),
        "{}",
        r.out
    );
    // Objects of other kinds only: nothing to check, which is no error
    // (a directory of manifests holds Services too); explain has nothing
    // to explain.
    let f = file(
        "no-plugin.yaml",
        b"apiVersion: v1\nkind: Service\nmetadata: {name: a}\n",
    );
    let r = run(&["check", "--strict", &f], None);
    assert_eq!(r.code, 0, "{}", r.out);
    assert!(
        r.out
            .contains("no-plugin.yaml: document 1: Service a skipped, not a WasmPlugin"),
        "{}",
        r.out
    );
    assert!(
        r.out
            .ends_with("no-plugin.yaml: nothing to check (no WasmPlugin among its objects)\n"),
        "{}",
        r.out
    );
    let r = run(&["explain", &f], None);
    assert_eq!(r.code, 1, "{}", r.out);
    assert!(
        r.out.contains("no ratebound configuration here"),
        "{}",
        r.out
    );
    // Plain documents in a stream are still refused.
    let f = file("plain-stream.yaml", b"a: 1\n---\nb: 2\n");
    assert_eq!(run(&["check", &f], None).code, 1);
    // explain on a stream: each configuration under its name.
    let f = file(
        "two-plugins.yaml",
        format!("{plugin}---\n{plugin}").as_bytes(),
    );
    let r = run(&["explain", "--format", "json", &f], None);
    assert_eq!(r.code, 0, "{}", r.out);
    let v: Value = serde_json::from_str(&r.out).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2);
    assert_eq!(v[1]["document"], 2);
    assert_eq!(v[1]["explain"]["instance"], "demo");
}

#[test]
fn a_json_configuration_may_name_its_schema() {
    let f = file(
        "with-schema.json",
        br#"{"$schema": "../filter-config/ratebound.schema.json",
            "routes": [{"name": "a", "bounds": [{"per": "address", "limit": 5, "window": "PT1M"}]}]}"#,
    );
    let r = run(&["check", "--strict", &f], None);
    assert_eq!(r.code, 0, "{}", r.out);
    let schema: Value = serde_json::from_str(&run(&["schema"], None).out).unwrap();
    assert_eq!(schema["$id"], "urn:ratebound:filter-config:v1");
    assert!(schema["properties"]["$schema"].is_object());
}

#[test]
fn a_configuration_without_routes_is_a_warning_and_fails_strict() {
    for input in [&b"{}"[..], b"", b"routes: []\n"] {
        let r = run(&["check", "-"], Some(input));
        assert_eq!(r.code, 0, "{}", r.out);
        assert!(
            r.out
                .contains("warning[no-routes]: $.routes: the configuration has no routes"),
            "{}",
            r.out
        );
        assert_eq!(run(&["check", "--strict", "-"], Some(input)).code, 1);
    }
}

/// Every command's `--help`, as docs/cli.md shows it.
fn help_section() -> String {
    let mut s = String::new();
    for cmd in [
        &[][..],
        &["check"],
        &["explain"],
        &["rls-config"],
        &["openapi"],
        &["schema"],
        &["completions"],
        &["top"],
        &["console"],
    ] {
        let mut args = cmd.to_vec();
        args.push("--help");
        let r = run(&args, None);
        assert_eq!(r.code, 0, "{args:?}");
        let title = if cmd.is_empty() {
            "ratebound".to_string()
        } else {
            format!("ratebound {}", cmd.join(" "))
        };
        s.push_str(&format!(
            "\n### `{title}`\n\n```console\n$ {title} --help\n{}```\n",
            r.out
        ));
    }
    s
}

#[test]
fn help_in_docs_is_the_real_help() {
    let path = root().join("docs/cli.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (start, end) = ("<!-- help:start -->\n", "<!-- help:end -->");
    let i = doc.find(start).unwrap() + start.len();
    let j = doc.find(end).unwrap();
    let want = help_section();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, format!("{}{want}{}", &doc[..i], &doc[j..])).unwrap();
        return;
    }
    assert!(
        doc[i..j] == want,
        "docs/cli.md's help section is stale: run `UPDATE_DOCS=1 cargo test --test cli help_in_docs` and commit it"
    );
}

const BROKEN_YAML: &str = "instance: demo
routes:
  - name: hello world
    match:
      path_prefix: hello
      methods: [get]
    bounds:
      - per: ip
        limit: \"5\"
        window: P2D
        burst: 3
";

#[test]
fn every_problem_is_reported_at_once_where_it_is() {
    let f = file("broken.yaml", BROKEN_YAML.as_bytes());
    let r = run(&["check", &f], None);
    assert_eq!(r.code, 1);
    for (want, line) in [
        ("error: $.routes[0].name: must be 1-64 characters", 3),
        ("error: $.routes[0].match.path_prefix: \"hello\" must start with '/'", 5),
        ("error: $.routes[0].match.methods[0]: \"get\" is not an HTTP method", 6),
        ("error: $.routes[0].bounds[0].per: per is \"ip\": it must be one of route, address, user, token, org, account", 8),
        ("error: $.routes[0].bounds[0].limit: limit must be a whole number from 1 to 4,294,967,295, not the text \"5\"", 9),
        ("error: $.routes[0].bounds[0].window: \"P2D\" is outside PT1S..P1D", 10),
        ("error: $.routes[0].bounds[0].burst: unknown field `burst`", 11),
    ] {
        let at = r.out.find(want).unwrap_or_else(|| panic!("missing {want:?} in\n{}", r.out));
        let next = &r.out[at..];
        assert!(
            next.contains(&format!("broken.yaml:{line}:")),
            "{want:?} is not placed at line {line}:\n{}",
            r.out
        );
    }
    assert!(
        r.out.ends_with("broken.yaml: invalid, 7 errors\n"),
        "{}",
        r.out
    );
    for rust in ["u64", "u32", "usize", "struct"] {
        assert!(!r.out.contains(rust), "{rust} in\n{}", r.out);
    }
    // The same as JSON, in file order, each with its line and column.
    let r = run(&["check", "--format", "json", &f], None);
    assert_eq!(r.code, 1);
    let v: Value = serde_json::from_str(&r.out).unwrap();
    assert_eq!(v["valid"], false);
    assert_eq!(v["exit"], 1);
    assert_eq!(v["files"][0]["valid"], false);
    assert_eq!(v["files"][0]["exit"], 1);
    let errors = v["files"][0]["documents"][0]["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 7);
    let lines: Vec<u64> = errors.iter().map(|e| e["line"].as_u64().unwrap()).collect();
    assert_eq!(lines, [3, 5, 6, 8, 9, 10, 11]);
    assert_eq!(errors[3]["column"], 14);
    // JSON files too, by the scanner.
    let f = file(
        "broken.json",
        b"{\"routes\": [{\"name\": \"a\",\n  \"bounds\": [{\"per\": \"ip\", \"limit\": 5, \"window\": \"PT1M\"},\n             {\"per\": \"address\", \"limit\": 5, \"window\": \"P9D\"}]}]}\n",
    );
    let r = run(&["check", &f], None);
    assert!(r.out.contains("broken.json:2:22"), "{}", r.out);
    assert!(r.out.contains("broken.json:3:55"), "{}", r.out);
    assert!(r.out.ends_with("invalid, 2 errors\n"), "{}", r.out);
}

#[test]
fn the_caret_is_under_the_error_after_wide_characters() {
    // 東京 is four columns wide on a terminal, two characters.
    let f = file(
        "wide.json",
        "{\"routes\": [{\"name\": \"r\", \"match\": {\"path_prefix\": \"/東京\"}, \"bounds\": [{\"per\": \"address\", \"limit\": 0, \"window\": \"PT1M\"}]}]}\n".as_bytes(),
    );
    let r = run(&["check", &f], None);
    assert_eq!(r.code, 1, "{}", r.out);
    let at = r.out.find("error: $.routes[0].bounds[0].limit").unwrap();
    let lines: Vec<&str> = r.out[at..].lines().collect();
    assert!(lines[1].ends_with("wide.json:1:99"), "{}", r.out);
    let source = lines[3].strip_prefix("1 | ").unwrap();
    let caret = lines[4].strip_prefix("  | ").unwrap();
    // The caret's column is the width of what precedes the `0`.
    let before = &source[..source.find("0,").unwrap()];
    let width = before.chars().count() + before.chars().filter(|c| !c.is_ascii()).count();
    assert_eq!(caret, format!("{}^", " ".repeat(width)), "{}", r.out);
}

#[test]
fn check_json_is_one_object_on_stdout_whatever_the_outcome() {
    let r = run(&["check", "--format", "json", DEMO], None);
    assert_eq!(r.code, 0);
    let v: Value = serde_json::from_str(&r.out).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["valid"], true);
    assert_eq!(v["files"].as_array().unwrap().len(), 1);
    assert_eq!(v["files"][0]["file"], DEMO);
    assert_eq!(v["files"][0]["valid"], true);
    assert_eq!(v["cross_checks"], serde_json::json!([]));
    let d = &v["files"][0]["documents"][0];
    assert_eq!(d["counts"]["routes"], 1);
    assert_eq!(d["warnings"][0]["code"], "per-node");
    assert!(d["warnings"][0]["line"].as_u64().is_some());
    // Unreadable syntax: still one object, with the file-level error.
    let r = run(
        &["check", "--format", "json", "-"],
        Some(b"{\"routes\": [}"),
    );
    assert_eq!(r.code, 1);
    let v: Value = serde_json::from_str(&r.out).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["files"][0]["file"], "-");
    assert_eq!(v["files"][0]["errors"][0]["line"], 1);
    // --strict with warnings: exit 1, said in the object.
    let r = run(&["check", "--strict", "--format", "json", "-"], Some(b"{}"));
    assert_eq!(r.code, 1);
    let v: Value = serde_json::from_str(&r.out).unwrap();
    assert_eq!(v["exit"], 1);
    assert_eq!(v["files"][0]["exit"], 1);
    assert_eq!(v["files"][0]["documents"][0]["failed_on_warnings"], true);
}

#[test]
fn top_says_what_is_wrong_with_its_admin_address() {
    let r = run(&["top", "--format", "json"], None);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("needs --once"), "{}", r.err);
    let r = run(
        &["top", "--once", "--admin", "https://127.0.0.1:9901"],
        None,
    );
    assert_eq!(r.code, 2);
    assert!(r.err.contains("http://HOST:PORT"), "{}", r.err);
    // Port 1 on loopback: refused at once, never a hang.
    let r = run(&["top", "--once", "--admin", "http://127.0.0.1:1"], None);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("cannot reach the Envoy admin"), "{}", r.err);
    assert!(r.out.is_empty());
    assert_eq!(run(&["top", "--interval", "0", "--once"], None).code, 2);
}

/// A fresh scratch directory named `name`.
fn dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("cli-dirs")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn plugin_named(name: &str) -> String {
    std::fs::read_to_string(root().join(PLUGIN))
        .unwrap()
        .replace("name: ratebound\n", &format!("name: {name}\n"))
}

#[test]
fn several_files_directories_and_r_are_checked_like_kubectl_f() {
    let d = dir("deploy");
    write(&d.join("a.yaml"), &plugin_named("a"));
    write(&d.join("sub/b.yaml"), &plugin_named("b"));
    write(
        &d.join("service.yml"),
        "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\n",
    );
    write(&d.join("notes.txt"), "not a manifest");
    write(&d.join("kustomization.yaml"), "resources: [a.yaml]\n");
    let ds = d.to_string_lossy().into_owned();
    // The directory's own files, not its subdirectory's.
    let r = run(&["check", &ds], None);
    assert_eq!(r.code, 0, "{}{}", r.out, r.err);
    assert!(
        r.out
            .contains("a.yaml (WasmPlugin istio-system/a, document 1): valid"),
        "{}",
        r.out
    );
    assert!(!r.out.contains("b.yaml"), "{}", r.out);
    assert!(!r.out.contains("notes.txt"), "{}", r.out);
    assert!(
        r.out
            .contains("service.yml: document 1: Service shop/web skipped, not a WasmPlugin"),
        "{}",
        r.out
    );
    assert!(
        r.out
            .contains("kustomization.yaml: skipped, kustomize's own file"),
        "{}",
        r.out
    );
    assert!(
        r.out
            .ends_with("3 files: 3 pass, 0 fail; 0 warnings across them\n"),
        "{}",
        r.out
    );
    // -R descends, and the two plugins (one instance, one selector) meet.
    let r = run(&["check", "-R", &ds], None);
    assert_eq!(r.code, 0, "{}", r.out);
    assert!(
        r.out
            .contains("b.yaml (WasmPlugin istio-system/b, document 1): valid"),
        "{}",
        r.out
    );
    assert!(
        r.out.contains("warning[shared-instance]: ")
            && r.out
                .contains("both run instance \"demo\" on the same workloads"),
        "{}",
        r.out
    );
    assert!(
        r.out
            .ends_with("4 files: 4 pass, 0 fail; 1 warning across them\n"),
        "{}",
        r.out
    );
    assert_eq!(
        run(&["check", "--recursive", "--strict", &ds], None).code,
        1
    );
    // Files and stdin together; the exit status is the worst.
    let bad = file(
        "limit-zero-many.json",
        br#"{"routes":[{"name":"a","bounds":[{"per":"address","limit":0,"window":"PT1M"}]}]}"#,
    );
    let r = run(&["check", DEMO, &bad, "-"], Some(b"{}"));
    assert_eq!(r.code, 1, "{}", r.out);
    assert!(r.out.contains("demo.json: valid"), "{}", r.out);
    assert!(
        r.out.contains("limit-zero-many.json: invalid, 1 error"),
        "{}",
        r.out
    );
    assert!(r.out.contains("-: valid (0 routes"), "{}", r.out);
    let r = run(&["check", &bad, "/nonexistent/x.yaml", DEMO], None);
    assert_eq!(r.code, 2);
    assert!(
        r.err.contains("cannot read /nonexistent/x.yaml"),
        "{}",
        r.err
    );
    assert!(
        r.out.contains("demo.json: valid"),
        "the rest is still checked: {}",
        r.out
    );
    // A directory with nothing to check is said, as kubectl does.
    let empty = dir("empty").to_string_lossy().into_owned();
    let r = run(&["check", &empty], None);
    assert_eq!(r.code, 2);
    assert!(
        r.err.contains("no .json, .yaml or .yml file in"),
        "{}",
        r.err
    );
    assert!(r.err.contains("(-R for its subdirectories)"), "{}", r.err);
}

#[test]
fn check_json_has_a_version_and_every_file_even_an_unreadable_one() {
    let r = run(
        &["check", "-o", "json", DEMO, "/nonexistent/ratebound.yaml"],
        None,
    );
    assert_eq!(r.code, 2);
    assert!(r.err.is_empty(), "all of it in the JSON: {}", r.err);
    let v: Value = serde_json::from_str(&r.out).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["exit"], 2);
    assert_eq!(v["valid"], false);
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 2);
    assert_eq!(files[0]["file"], DEMO);
    assert_eq!(files[0]["valid"], true);
    assert_eq!(files[0]["documents"][0]["counts"]["routes"], 1);
    assert_eq!(files[1]["file"], "/nonexistent/ratebound.yaml");
    assert_eq!(files[1]["valid"], false);
    assert_eq!(files[1]["exit"], 2);
    assert_eq!(files[1]["documents"], serde_json::json!([]));
    assert!(
        files[1]["errors"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with("cannot read /nonexistent/ratebound.yaml: "),
        "{}",
        r.out
    );
    // -o is --format; the same shape for one file.
    let long = run(&["check", "--format", "json", DEMO], None).out;
    assert_eq!(run(&["check", "-o", "json", DEMO], None).out, long);
    assert_eq!(run(&["check", "-o", "xml", DEMO], None).code, 2);
}

#[test]
fn a_service_cluster_no_envoy_filter_adds_is_a_warning_with_the_fix() {
    let filter =
        std::fs::read_to_string(root().join("envoy-demo/istio/envoyfilter-rls.yaml")).unwrap();
    let plugin =
        std::fs::read_to_string(root().join("envoy-demo/istio/wasmplugin-installation.yaml"))
            .unwrap();
    let good = file("rls-good.yaml", format!("{filter}---\n{plugin}").as_bytes());
    let r = run(&["check", "--strict", &good], None);
    assert_eq!(r.code, 0, "{}", r.out);
    assert!(!r.out.contains("rls-cluster-not-added"), "{}", r.out);
    let renamed = plugin.replace("cluster: ratebound-rls", "cluster: rls");
    let bad = file("rls-bad.yaml", format!("{filter}---\n{renamed}").as_bytes());
    let r = run(&["check", &bad], None);
    assert_eq!(r.code, 0, "{}", r.out);
    assert!(
        r.out.contains("warning[rls-cluster-not-added]: "),
        "{}",
        r.out
    );
    assert!(
        r.out.contains("rate_limit_service.cluster is \"rls\", but the EnvoyFilters read here add no cluster of that name (")
            && r.out.contains("(EnvoyFilter istio-system/ratebound-rls, document 1) adds \"ratebound-rls\"): name the same cluster in both"),
        "{}",
        r.out
    );
    assert_eq!(run(&["check", "--strict", &bad], None).code, 1);
    let r = run(&["check", "-o", "json", &bad], None);
    let v: Value = serde_json::from_str(&r.out).unwrap();
    assert_eq!(v["cross_checks"][0]["code"], "rls-cluster-not-added");
    assert_eq!(v["cross_checks"][0]["level"], "warning");
    assert!(v["cross_checks"][0]["documents"][0]
        .as_str()
        .unwrap()
        .ends_with("rls-bad.yaml (WasmPlugin istio-system/ratebound-signin, document 2)"));
    // Across files too: the EnvoyFilter in one, the WasmPlugin in another.
    let plugin_only = file("rls-plugin-only.yaml", renamed.as_bytes());
    let r = run(
        &[
            "check",
            "envoy-demo/istio/envoyfilter-rls.yaml",
            &plugin_only,
        ],
        None,
    );
    assert!(
        r.out.contains("warning[rls-cluster-not-added]"),
        "{}",
        r.out
    );
}

#[test]
fn yaml_is_read_as_kubectl_reads_it_and_what_differs_is_flagged() {
    let yes = file(
        "yaml11-yes.yaml",
        b"shadow: yes\nroutes:\n  - name: a\n    bounds: [{per: address, limit: 5, window: PT1M}]\n",
    );
    let r = run(&["check", &yes], None);
    assert_eq!(r.code, 0, "{}", r.out);
    assert!(r.out.contains("warning[yaml-1.1]: $.shadow: kubectl reads yes as true (YAML 1.1), YAML 1.2 as the text \"yes\""), "{}", r.out);
    assert!(r.out.contains("yaml11-yes.yaml:1:9"), "{}", r.out);
    assert!(r.out.contains("1 warning"), "{}", r.out);
    assert_eq!(run(&["check", "--strict", &yes], None).code, 1);
    let v: Value = serde_json::from_str(&run(&["check", "-o", "json", &yes], None).out).unwrap();
    let w = &v["files"][0]["documents"][0]["warnings"];
    assert!(w
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w["code"] == "yaml-1.1" && w["path"] == "$.shadow" && w["line"] == 1));
    let octal = file(
        "yaml11-octal.yaml",
        b"routes:\n  - name: a\n    bounds: [{per: address, limit: 0100, window: PT1M}]\n",
    );
    let r = run(&["check", &octal], None);
    assert_eq!(r.code, 1, "{}", r.out);
    assert!(r.out.contains("error: $.routes[0].bounds[0].limit: kubectl reads 0100 as 64 (YAML 1.1: a leading zero makes it octal)"), "{}", r.out);
    // Quoted, it is what it says.
    let quoted = file("yaml11-quoted.yaml", b"shadow: 'yes'\n");
    let r = run(&["check", &quoted], None);
    assert!(!r.out.contains("yaml-1.1"), "{}", r.out);
}

#[test]
fn a_window_in_another_tools_shorthand_is_answered_with_the_iso_spelling() {
    for (written, want) in [
        ("60s", "PT1M"),
        ("1m", "PT1M"),
        ("1h", "PT1H"),
        ("30 seconds", "PT30S"),
        ("1d", "P1D"),
    ] {
        let yaml = format!(
            "routes:\n  - name: a\n    bounds: [{{per: address, limit: 5, window: {written}}}]\n"
        );
        let r = run(&["check", "-"], Some(yaml.as_bytes()));
        assert_eq!(r.code, 1, "{written}: {}", r.out);
        let says = format!("error: $.routes[0].bounds[0].window: {written:?} is not an ISO-8601 duration; write {want:?}");
        assert!(r.out.contains(&says), "{written}: {}", r.out);
    }
}

#[test]
fn top_quits_on_q_and_puts_the_terminal_back() {
    use std::io::Read;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};
    // A terminal for top: util-linux script(1) runs it on a pseudo-terminal.
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("no script(1) here: skipped");
        return;
    }
    // A stand-in admin endpoint: the same /stats to every request.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let body = "wasmcustom.ratebound.demo.hello.per_address.allowed: 5\n";
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let d = dir("top");
    let (before, after) = (d.join("before"), d.join("after"));
    let shell = format!(
        "stty -g > {}; {} top --admin http://127.0.0.1:{port} --interval 0.2; echo exit=$?; stty -g > {}",
        before.display(),
        env!("CARGO_BIN_EXE_ratebound"),
        after.display()
    );
    let mut child = Command::new("script")
        .args(["-qfec", &shell, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let seen = Arc::new(Mutex::new(String::new()));
    let mut stdout = child.stdout.take().unwrap();
    let sink = Arc::clone(&seen);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = stdout.read(&mut buf) {
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let wait_for = |what: &str| {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            if seen.lock().unwrap().contains(what) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    };
    let shown = wait_for("(q to quit)");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"q").unwrap();
    stdin.flush().unwrap();
    let quit = wait_for("exit=");
    let _ = child.kill();
    let _ = child.wait();
    let out = seen.lock().unwrap().clone();
    assert!(shown, "no live view: {out}");
    assert!(quit, "q did not quit: {out}");
    assert!(out.contains("exit=0"), "{out}");
    assert_eq!(
        std::fs::read_to_string(&before).unwrap(),
        std::fs::read_to_string(&after).unwrap(),
        "the terminal is not put back"
    );
}

const KEYED_PLUGIN: &str = r#"apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: rb, namespace: istio-system}
spec:
  url: oci://registry.example.com/ratebound:0.1.0
  sha256: SHA
  ENV
  pluginConfig:
    instance: shop
    rate_limit_service: {cluster: rls, domain: shop, key_secret: {env: RB_KEY}}
    routes:
    - name: api
      bounds:
      - {name: per_address, per: address, limit: 5, window: PT1M}
      - {name: shared, per: address, scope: installation, limit: 50, window: PT1M}
"#;

fn keyed_plugin(sha: &str, env: &str) -> String {
    KEYED_PLUGIN.replace("SHA", sha).replace("ENV", env)
}

#[test]
fn check_refuses_a_wasmplugin_whose_vm_lacks_the_key_secrets_variable() {
    let bad = file("no-env.yaml", keyed_plugin("a", "").as_bytes());
    let r = run(&["check", &bad], None);
    assert_eq!(r.code, 1, "{}", r.out);
    assert!(
        r.out.contains("$.rate_limit_service.key_secret.env: the WasmPlugin's spec.vmConfig.env has no \"RB_KEY\""),
        "{}",
        r.out
    );
    let good = file(
        "host-env.yaml",
        keyed_plugin("a", "vmConfig: {env: [{name: RB_KEY, valueFrom: HOST}]}").as_bytes(),
    );
    let r = run(&["check", &good], None);
    assert_eq!(r.code, 0, "{}", r.out);
}

#[test]
fn diff_says_a_new_prefix_resets_and_a_new_module_is_said() {
    let env = "vmConfig: {env: [{name: RB_KEY, valueFrom: HOST}]}";
    let old = file("diff-old.yaml", keyed_plugin("aaa", env).as_bytes());
    // Only the module: nothing lost, but said.
    let new = file("diff-module.yaml", keyed_plugin("bbb", env).as_bytes());
    let r = run(&["diff", &old, &new], None);
    assert_eq!(r.code, 0, "{}", r.out);
    assert!(
        r.out
            .contains("module: the module changes (sha256 aaa → bbb)"),
        "{}",
        r.out
    );
    let r = run(&["diff", &old, &new, "--format", "json"], None);
    let v: Value = serde_json::from_str(&r.out).unwrap();
    assert_eq!(v["module"]["new_sha256"], "bbb");
    // A new prefix: every address caller restarts, exit 1.
    let prefix = keyed_plugin("aaa", env).replace(
        "    instance: shop\n",
        "    instance: shop\n    client_address: {ipv4_prefix: 24}\n",
    );
    let new = file("diff-prefix.yaml", prefix.as_bytes());
    let r = run(&["diff", &old, &new], None);
    assert_eq!(r.code, 1, "{}", r.out);
    assert!(r.out.contains("resets api/per_address"), "{}", r.out);
    assert!(
        r.out.contains("client_address.ipv4_prefix 32 → 24"),
        "{}",
        r.out
    );
    assert!(!r.out.contains("module:"), "{}", r.out);
}

//! `explain` as text for a terminal: one block per route, its bounds by
//! phase, each bound in its one line and each warning under the row it
//! concerns, long lines wrapped; `--verbose` adds each bound's full
//! statement (its words and every note) under its line.

use ratebound::reading::explain::{Explanation, RouteRow};
use ratebound::reading::warnings::{Severity, Warning};
use std::fmt::Write;

/// Lines are wrapped to this many characters.
const WIDTH: usize = 100;

/// The text of `explain`: with `verbose`, each bound's detail under its
/// line.
pub fn text(e: &Explanation, verbose: bool) -> String {
    let mut out = String::new();
    let nodes = match e.nodes {
        Some(1) => " (on 1 node)".to_string(),
        Some(n) => format!(" (on {n} nodes)"),
        None if e.summary.node_bounds > 0 => " (counted per Envoy node)".to_string(),
        // Installation and fleet bounds only: no count is per node.
        None => String::new(),
    };
    let operations = if e.summary.operations == 0 {
        String::new()
    } else {
        format!(
            ", {} with {}",
            plural(e.summary.operations, "operation"),
            plural(e.summary.operation_bounds, "bound")
        )
    };
    let _ = writeln!(
        out,
        "ratebound configuration {:?}: {}, {}{operations}{nodes}",
        e.instance,
        plural(e.summary.routes, "route"),
        plural(e.summary.bounds, "bound"),
    );
    if let Some(a) = &e.client_address {
        let _ = writeln!(out, "{}  {}", a.words, a.path);
    }
    for r in &e.routes {
        out.push('\n');
        route(&mut out, r, verbose);
    }
    let more = if verbose || e.summary.bounds + e.summary.operation_bounds == 0 {
        ""
    } else {
        "; --verbose for each bound's full reading"
    };
    let _ = writeln!(
        out,
        "\n{}, {}{more}",
        plural(e.summary.warnings, "warning"),
        plural(e.summary.notes, "note")
    );
    out
}

fn route(out: &mut String, r: &RouteRow, verbose: bool) {
    let _ = writeln!(out, "route {:?}  {}", r.name, r.path);
    wrap(out, "  takes ", "    ", &r.matches);
    for w in &r.warnings {
        warning(out, "  ", w, true);
    }
    for p in &r.phases {
        if p.bounds.is_empty() {
            let _ = writeln!(out, "  {}: none", p.phase.title());
            continue;
        }
        let _ = writeln!(out, "  {}:", p.phase.title());
        let width = p.bounds.iter().map(|b| b.name.len()).max().unwrap_or(0);
        for b in &p.bounds {
            let line = match &b.operation {
                Some(op) => format!("{op}: {}", b.line),
                None => b.line.clone(),
            };
            let _ = writeln!(out, "    {:<width$}  {line}  {}", b.name, b.path);
            // The notes are the detail's (the line says what they say);
            // warnings are said in full either way.
            if verbose {
                for statement in b.detail.split('\n') {
                    wrap(out, "      ", "        ", statement);
                }
            }
            for w in b.warnings.iter().filter(|w| w.level == Severity::Warning) {
                warning(out, "      ", w, false);
            }
        }
    }
    for s in &r.shared_entries {
        wrap(out, "  ", "    ", s);
    }
    if let Some(c) = &r.counters {
        let _ = writeln!(
            out,
            "  {}, {}:",
            plural(r.operations.len(), "operation"),
            c.words()
        );
        let width = r.operations.iter().map(|o| o.name.len()).max().unwrap_or(0);
        for o in &r.operations {
            let _ = writeln!(out, "    {:<width$}  {}  {}", o.name, o.title, o.path);
            for w in &o.warnings {
                warning(out, "      ", w, true);
            }
        }
    }
}

fn warning(out: &mut String, indent: &str, w: &Warning, with_path: bool) {
    let head = if with_path {
        format!(
            "{indent}{}[{}] {}: ",
            w.level.as_str(),
            w.code.as_str(),
            w.path
        )
    } else {
        format!("{indent}{}[{}]: ", w.level.as_str(), w.code.as_str())
    };
    wrap(out, &head, &format!("{indent}  "), &w.message);
}

/// Writes `head` then `text`, wrapped at word boundaries to [`WIDTH`], the
/// continuation lines starting with `hang`.
fn wrap(out: &mut String, head: &str, hang: &str, text: &str) {
    let mut line = head.to_string();
    let mut empty = true;
    for word in text.split(' ') {
        if !empty && line.chars().count() + 1 + word.chars().count() > WIDTH {
            out.push_str(line.trim_end());
            out.push('\n');
            line = hang.to_string();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratebound::config::parse;
    use ratebound::config::plan::Plan;
    use ratebound::reading::explain::explain;

    #[test]
    fn long_lines_are_wrapped_under_their_head() {
        let mut out = String::new();
        wrap(&mut out, "  note: ", "    ", &"word ".repeat(40));
        for l in out.lines() {
            assert!(l.chars().count() <= WIDTH, "{l:?}");
        }
        assert!(out
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("    word")));
    }

    #[test]
    fn operations_read_under_their_route_by_phase_with_their_counters() {
        let c = parse(br#"{"instance":"shop","identity":{"header":{"user":"x-user"}},"routes":[{"name":"shop","match":{"path_prefix":"/api"},
            "bounds":[{"name":"addr","per":"address","limit":100,"window":"PT1M"}],
            "operations":[
              {"operation_id":"payOrder","method":"POST","path":"/api/orders/{id}/pay","bounds":[{"per":"user","limit":5,"window":"PT1M"}]},
              {"name":"mine","method":"GET","path":"/api/orders/mine","bounds":[{"name":"addr","per":"address","limit":30,"window":"PT1M"}]},
              {"operation_id":"health","method":"GET","path":"/health","bounds":[{"per":"route","limit":10,"window":"PT1S"}]}]}]}"#)
        .unwrap();
        let t = text(&explain(&Plan::compile(&c), None), false);
        assert!(
            t.starts_with("ratebound configuration \"shop\": 1 route, 1 bound, 3 operations with 3 bounds (counted per Envoy node)\n"),
            "{t}"
        );
        let before = t.find("  before identity").unwrap();
        let after = t.find("  after identity").unwrap();
        let mine = t
            .find("    mine.addr  GET /api/orders/mine: per node: 30 a minute per client address, per operation; N nodes admit N × 30  $.routes[0].operations[1].bounds[0]\n")
            .unwrap_or_else(|| panic!("{t}"));
        let health = t
            .find("    health.b0  GET /health (health): per node: 10 a second for the whole operation; N nodes admit N × 10  $.routes[0].operations[2].bounds[0]\n")
            .unwrap_or_else(|| panic!("{t}"));
        let pay = t
            .find("    payOrder.b0  POST /api/orders/{id}/pay (payOrder): per node: 5 a minute per user, per operation; N nodes admit N × 5  $.routes[0].operations[0].bounds[0]\n")
            .unwrap_or_else(|| panic!("{t}"));
        assert!(
            before < mine && mine < health && health < after && after < pay,
            "{t}"
        );
        assert!(
            t.contains("  3 operations, up to 20,001 counters (2 keyed bounds × 10,000 callers + 1 counter for a whole operation):\n"),
            "{t}"
        );
        assert!(
            t.contains("    health    GET /health (health)  $.routes[0].operations[2]\n      warning[unreachable-operation] $.routes[0].operations[2].path: operation GET /health (health)\n        never matches"),
            "{t}"
        );
    }

    #[test]
    fn the_text_reads_by_route_and_phase() {
        let c = parse(br#"{"instance":"demo","routes":[{"name":"hello","match":{"path_prefix":"/hello","methods":["GET"]},
            "bounds":[{"name":"per_address","per":"address","limit":5,"window":"PT1M"}]}]}"#)
        .unwrap();
        let e = explain(&Plan::compile(&c), Some(3));
        let t = text(&e, false);
        assert!(
            t.starts_with("ratebound configuration \"demo\": 1 route, 1 bound (on 3 nodes)\n"),
            "{t}"
        );
        assert!(
            t.contains(
                "\nroute \"hello\"  $.routes[0]\n  takes GET requests, path starting with /hello\n"
            ),
            "{t}"
        );
        // One line for the bound, and nothing under it but warnings.
        assert!(
            t.contains("    per_address  on 3 nodes: up to 3 × 5 = 15 a minute per client address  $.routes[0].bounds[0]\n  after identity"),
            "{t}"
        );
        assert!(
            t.contains("  after identity (checked once the caller is known): none\n"),
            "{t}"
        );
        assert!(
            t.ends_with("\n0 warnings, 1 note; --verbose for each bound's full reading\n"),
            "{t}"
        );
        // --verbose: the full statement under the line, as before.
        let t = text(&e, true);
        assert!(
            t.contains("    per_address  on 3 nodes: up to 3 × 5 = 15 a minute per client address  $.routes[0].bounds[0]\n      5 a minute per client address\n      per node: on 3 nodes up to 3 × 5 = 15 a minute"),
            "{t}"
        );
        assert!(t.ends_with("\n0 warnings, 1 note\n"), "{t}");
    }
}

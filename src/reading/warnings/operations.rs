//! Operations a route never lets through: its `match` takes none of the
//! operation's methods, or no path its template takes starts with the
//! route's `path_prefix`.

use super::{about_operation, operation_path, Warning, WarningCode};
use crate::config::normalize::method_matches;
use crate::config::operations::{parse_template, Segment};
use crate::config::plan::{Operation, Route};
use crate::reading::words;

/// An operation whose method or path the route's `match` excludes.
pub(super) fn unreachable_operation(route: &Route, op: &Operation) -> Option<Warning> {
    let at = operation_path(route, op);
    let methods = &route.matching.methods;
    // A HEAD request finds a GET operation: a route taking HEAD reaches it.
    let reached = |m: &String| method_matches(&op.method, m);
    if !methods.is_empty() && !methods.iter().any(reached) {
        return Some(about_operation(
            WarningCode::UnreachableOperation,
            format!("{at}.method"),
            route,
            op,
            format!(
                "operation {} never matches: route {:?} takes only {} requests, so its bounds never count",
                words::title(op),
                route.name,
                methods.join(" or ")
            ),
        ));
    }
    let prefix = route.matching.path_prefix.as_deref()?;
    (!template_reachable(prefix, &op.path)).then(|| {
        about_operation(
            WarningCode::UnreachableOperation,
            format!("{at}.path"),
            route,
            op,
            format!(
                "operation {} never matches: route {:?} takes only paths starting with {prefix}, and no path of {} does, so its bounds never count",
                words::title(op),
                route.name,
                op.path
            ),
        )
    })
}

/// One step of a path template, for [`template_reachable`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum TemplateStep {
    Byte(u8),
    /// One or more bytes other than `/`.
    Param,
}

/// True unless no request path that the operations matcher takes for
/// `template` starts with `prefix`. Conservative: true whenever unsure
/// (percent-encoding in either, a template that does not parse).
///
/// The paths a template takes: `/` and each segment, a parameter being one
/// or more bytes other than `/`, then an optional trailing `/` (`/` itself
/// for the template `/`). The query string is cut before both the route's
/// prefix and the operation are matched.
pub fn template_reachable(prefix: &str, template: &str) -> bool {
    if prefix.contains('%') || template.contains('%') {
        return true;
    }
    let Ok(segments) = parse_template(template) else {
        return true;
    };
    let mut steps = Vec::new();
    for seg in &segments {
        steps.push(TemplateStep::Byte(b'/'));
        match seg {
            Segment::Literal(l) => steps.extend(l.bytes().map(TemplateStep::Byte)),
            Segment::Param { prefix, suffix } => {
                steps.extend(prefix.bytes().map(TemplateStep::Byte));
                steps.push(TemplateStep::Param);
                steps.extend(suffix.bytes().map(TemplateStep::Byte));
            }
        }
    }
    if segments.is_empty() {
        steps.push(TemplateStep::Byte(b'/'));
    }
    let end = steps.len();
    // States: (i, inside): before step i, or inside the parameter at step i
    // with at least one byte taken; `end + 1` is after the trailing slash.
    let mut states: Vec<(usize, bool)> = vec![(0, false)];
    for c in prefix.bytes() {
        let mut next = Vec::new();
        for &(i, inside) in &states {
            if inside {
                if c != b'/' {
                    next.push((i, true));
                }
                // The parameter may end here: the byte is the next step's.
                step(&steps, end, i + 1, c, &mut next);
            } else {
                step(&steps, end, i, c, &mut next);
            }
        }
        next.sort_unstable();
        next.dedup();
        if next.is_empty() {
            return false;
        }
        states = next;
    }
    true
}

/// The states after byte `c` from before step `i`.
fn step(steps: &[TemplateStep], end: usize, i: usize, c: u8, next: &mut Vec<(usize, bool)>) {
    match steps.get(i) {
        Some(TemplateStep::Byte(b)) if *b == c => next.push((i + 1, false)),
        Some(TemplateStep::Param) if c != b'/' => next.push((i, true)),
        None if i == end && c == b'/' => next.push((end + 1, false)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_reachability_is_proved_not_guessed() {
        let yes = [
            ("/api", "/api/orders"),
            ("/api/", "/api/orders"),
            ("/api/orders/", "/api/orders"), // trailing slash is the same path
            ("/api/orders/mine", "/api/orders/{id}"),
            ("/api/orders/42/p", "/api/orders/{id}/pay"),
            ("/files/a.j", "/files/{name}.json"),
            ("/files/x.json.json", "/files/{name}.json"),
            ("/", "/"),
            ("//", "/"),
            ("/api/v", "/api/{version}/orders"),
            ("/caf", "/caf%C3%A9"), // percent-encoding: unsure, so yes
            ("/%61pi", "/api"),
            ("/ord", "/{x}"),
            ("", "/anything"),
        ];
        for (p, t) in yes {
            assert!(template_reachable(p, t), "{p} {t}");
        }
        let no = [
            ("/api", "/health"),
            ("/api/v2", "/api/v1/orders"),
            ("/api/orders/5/", "/api/orders/{id}x"),
            ("/api/orders//", "/api/orders/{id}"),
            ("/api/orders/42/pay/", "/api/orders/{id}"),
            ("/api/orders/mine/x", "/api/orders/{id}"),
            ("/api/orders/mine//", "/api/orders/{id}"),
            ("/apis", "/api/orders"),
            ("/files/.json/", "/files/{name}.json"),
            ("/a", "/"),
        ];
        for (p, t) in no {
            assert!(!template_reachable(p, t), "{p} {t}");
        }
    }
}

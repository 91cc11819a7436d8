//! A route's match, operations and bounds.

use super::super::error::{err, ConfigError};
use super::super::names::valid_name;
use super::super::*;
use super::cost::validate as validate_cost;
use super::identity::validate_identity_needs;
use super::service::validate_bound;
use super::{authority_error, bound_name, operation_name};

pub(super) fn validate_bounds(
    c: &WrittenConfig,
    route: &RouteConfig,
    bounds: &[BoundConfig],
    at: &str,
    errors: &mut Vec<ConfigError>,
) -> Option<Vec<CheckedBound>> {
    let mut names = std::collections::HashSet::new();
    let mut checked = Some(Vec::with_capacity(bounds.len()));
    for (j, b) in bounds.iter().enumerate() {
        let before = errors.len();
        let bt = format!("{at}[{j}]");
        if let Some(name) = &b.name {
            if !valid_name(name) {
                errors.push(err(
                    format!("{bt}.name"),
                    "must be 1-64 characters of A-Z a-z 0-9 _ -",
                ));
            }
        }
        let name = bound_name(b, j);
        if !names.insert(name.clone()) {
            errors.push(err(
                format!("{bt}.name"),
                format!("duplicate bound name {name:?} here"),
            ));
        }
        let limit = u32::try_from(b.limit).ok().filter(|l| *l > 0);
        if limit.is_none() {
            errors.push(err(
                format!("{bt}.limit"),
                format!(
                    "{} is out of range: a limit is a whole number from 1 to {}",
                    b.limit,
                    u32::MAX
                ),
            ));
        }
        let ms = window_ms(&b.window);
        if let Err(e) = &ms {
            errors.push(err(format!("{bt}.window"), e.to_string()));
        }
        let ms = ms.ok();
        validate_bound(c, route, b, ms, &bt, errors);
        validate_identity_needs(c.identity.as_ref(), b, &bt, errors);
        validate_enforcement(b.enforce_percent, b.shadow, &bt, errors);
        let cost = validate_cost(b, &bt, errors);
        if b.per == Per::Model && !reads_its_answers_json(route) {
            errors.push(err(
                format!("{bt}.per"),
                "\"model\" is read from the request body of a route whose cost its answer's JSON \
                 names: give a bound of the route \"cost\": {\"response_json\": \
                 \"/usage/total_tokens\"} (or \"input_json\" and \"output_json\")",
            ));
        }
        let bound = (|| {
            let window_ms = ms?;
            Some(CheckedBound {
                limit: limit?,
                window_ms,
                counted: match b.scope {
                    Scope::Node => CheckedScope::Node,
                    Scope::Fleet => CheckedScope::Fleet,
                    Scope::Installation => CheckedScope::Installation(
                        Unit::of_ms(window_ms)?,
                        b.shape.unwrap_or_default(),
                    ),
                },
                // The configuration's share is checked once, at `$`.
                enforce_percent: match b.enforce_percent.or(c.enforce_percent) {
                    None => 100,
                    Some(p) => u8::try_from(p).ok().filter(|p| *p <= 100)?,
                },
                cost: cost?,
            })
        })()
        .filter(|_| errors.len() == before);
        checked = checked.zip(bound).map(|(mut all, b)| {
            all.push(b);
            all
        });
    }
    checked
}

/// A bound of `route` (or of its operations) reads its cost in the
/// answer's JSON: its requests' bodies are read first.
fn reads_its_answers_json(route: &RouteConfig) -> bool {
    route
        .bounds
        .iter()
        .chain(route.operations.iter().flat_map(|o| o.bounds.iter()))
        .filter_map(|b| b.cost.as_ref())
        .any(|c| c.response_json.is_some() || c.output_json.is_some())
}

/// `enforce_percent` (of the configuration or a bound at `at`): a share,
/// and not beside `shadow`, which already enforces none.
pub(super) fn validate_enforcement(
    percent: Option<u32>,
    shadow: bool,
    at: &str,
    errors: &mut Vec<ConfigError>,
) {
    let Some(p) = percent else {
        return;
    };
    if p > 100 {
        errors.push(err(
            format!("{at}.enforce_percent"),
            format!(
                "{p} is out of range: carry out 0 to 100 percent of the refusals (100 by default)"
            ),
        ));
    } else if shadow {
        errors.push(err(
            format!("{at}.enforce_percent"),
            "\"shadow\": true already carries out none of the refusals: give one of the two \
             (\"enforce_percent\": 0 spares every refusal as a shadow bound does, and raising it \
             later keeps the bound's counts; turning \"shadow\" off starts them again)",
        ));
    }
}

pub(super) fn validate_operations(
    c: &WrittenConfig,
    r: &RouteConfig,
    at: &str,
    errors: &mut Vec<ConfigError>,
) -> Option<Vec<CheckedOperation>> {
    let mut names = std::collections::HashSet::new();
    let mut items = std::collections::HashSet::new();
    let mut checked = Some(Vec::with_capacity(r.operations.len()));
    for (k, o) in r.operations.iter().enumerate() {
        let ot = format!("{at}.operations[{k}]");
        let name = operation_name(o, k);
        if !valid_name(&name) {
            errors.push(err(
                if o.name.is_some() { format!("{ot}.name") } else { format!("{ot}.operation_id") },
                format!("{name:?} cannot name stats (1-64 characters of A-Z a-z 0-9 _ -); give the operation a \"name\""),
            ));
        } else if !names.insert(name.clone()) {
            errors.push(err(
                format!("{ot}.name"),
                format!("duplicate operation name {name:?} in this route"),
            ));
        }
        if o.method.is_empty() || !o.method.bytes().all(|b| b.is_ascii_uppercase()) {
            errors.push(err(
                format!("{ot}.method"),
                format!(
                    "{:?} is not an HTTP method; write it in capitals, e.g. \"POST\"",
                    o.method
                ),
            ));
        }
        let template = match crate::config::operations::parse_template(&o.path) {
            Err(m) => {
                errors.push(err(format!("{ot}.path"), m));
                None
            }
            Ok(segments) => {
                if !items.insert((o.method.clone(), segments.clone())) {
                    errors.push(err(
                        format!("{ot}.path"),
                        format!("{} {} is listed twice in this route (parameter names do not make templates different)", o.method, o.path),
                    ));
                }
                Some(segments)
            }
        };
        if o.bounds.is_empty() {
            errors.push(err(
                format!("{ot}.bounds"),
                "lists no bounds; an operation is listed only to carry bounds of its own",
            ));
        }
        let bounds = validate_bounds(c, r, &o.bounds, &format!("{ot}.bounds"), errors);
        let operation = template
            .zip(bounds)
            .map(|(template, bounds)| CheckedOperation { template, bounds });
        checked = checked.zip(operation).map(|(mut all, o)| {
            all.push(o);
            all
        });
    }
    checked
}

pub(super) fn validate_match(m: &MatchConfig, at: &str, errors: &mut Vec<ConfigError>) {
    if let Some(p) = &m.path_prefix {
        if !p.starts_with('/') {
            errors.push(err(
                format!("{at}.path_prefix"),
                format!("{p:?} must start with '/'"),
            ));
        } else if let Some((path, _)) = p.split_once('?') {
            errors.push(err(
                format!("{at}.path_prefix"),
                format!("{p:?} holds a query ('?'), which is cut before matching: no request would ever match; write the path alone, {path:?}"),
            ));
        } else if let Some((path, _)) = p.split_once('#') {
            errors.push(err(
                format!("{at}.path_prefix"),
                format!("{p:?} holds a fragment ('#'), which clients never send: no request would ever match; write the path alone, {path:?}"),
            ));
        }
    }
    if let Some(n) = &m.route_name {
        if n.is_empty() {
            errors.push(err(
                format!("{at}.route_name"),
                "must not be empty (omit it to match any Envoy route)",
            ));
        }
    }
    if let Some(h) = &m.host {
        if h.is_empty() {
            errors.push(err(
                format!("{at}.host"),
                "must not be empty (omit it to match any host)",
            ));
        } else {
            errors.extend(authority_error(h, format!("{at}.host"), "for any port"));
        }
    }
    for (k, meth) in m.methods.iter().enumerate() {
        if meth.is_empty() || !meth.bytes().all(|b| b.is_ascii_uppercase()) {
            errors.push(err(
                format!("{at}.methods[{k}]"),
                format!("{meth:?} is not an HTTP method; write it in capitals, e.g. \"GET\""),
            ));
        }
    }
}

//! The picked operations written into the BASE configuration (or a new
//! one) as route `--route`'s `operations`, then read back by the filter's
//! own parser, its errors told against what the user wrote.

use super::document::{server_path, OpenapiDocument, OpenapiOperation};
use super::picks::{duplicate_ids, pick, Picked};
use super::{error, Error};
use crate::input;
use ratebound::config::{self, Config};
use serde_json::{json, Map, Value};

/// What `ratebound openapi` was asked.
#[derive(Debug, Clone, Default)]
pub struct OpenapiRequest {
    /// The route whose `operations` are set.
    pub route: String,
    /// `match.path_prefix` of the route, when it is created.
    pub match_prefix: Option<String>,
    /// Put the path of the operations' `servers` URL in front of their paths.
    pub servers: bool,
    /// Names of the files, for errors.
    pub spec_label: String,
    pub bounds_label: String,
}

impl OpenapiRequest {
    /// Where a key of the bounds file is: `bounds.json "payOrder"`.
    pub(super) fn at_key(&self, key: &str) -> String {
        format!("{} {key:?}", self.bounds_label)
    }
}

/// A configuration that parsed, and what is worth saying about how it was made.
#[derive(Debug, Clone)]
pub struct Generated {
    pub json: Value,
    pub config: Config,
    pub notes: Vec<String>,
}

/// The BASE configuration (or none) with route `req.route`'s operations
/// set to the picked operations and their bounds. Every problem is told.
pub fn generate(
    doc: &OpenapiDocument,
    picks: &[(String, Value)],
    base: Option<Value>,
    req: &OpenapiRequest,
) -> Result<Generated, Vec<Error>> {
    let mut errors = Vec::new();
    let mut notes = Vec::new();
    if picks.is_empty() {
        errors.push(error(
            req.bounds_label.as_str(),
            "picks no operation; map an operationId (or \"METHOD /path\") to its bounds",
        ));
    }
    duplicate_ids(doc, req, &mut notes);
    let picked = pick(doc, picks, req, &mut errors);
    let operations = write_operations(doc, &picked, req, &mut errors);
    if !errors.is_empty() {
        return Err(errors);
    }
    let (root, route) = into_base(base, operations, req, &mut notes)?;
    read_back(root, route, &picked, doc, req, notes)
}

/// The picked operations as the configuration writes them: a stat name
/// (the operationId when it can be one), the operationId, the method, the
/// path (behind its servers' path with `--servers`), the bounds as written.
fn write_operations(
    doc: &OpenapiDocument,
    picked: &[Picked],
    req: &OpenapiRequest,
    errors: &mut Vec<Error>,
) -> Vec<Value> {
    let mut names: Vec<String> = Vec::new();
    let mut operations = Vec::new();
    for &(i, key, bounds) in picked {
        let op = &doc.operations[i];
        let path = if req.servers {
            match prefix_of(op) {
                Ok(prefix) => format!("{prefix}{}", op.path),
                Err(m) => {
                    errors.push(error(req.at_key(key), m));
                    continue;
                }
            }
        } else {
            op.path.clone()
        };
        let mut o = Map::new();
        // The operationId names the operation's stats when it can.
        let natural = op
            .operation_id
            .clone()
            .filter(|id| stat_name(id) && !names.contains(id));
        let name = match natural {
            Some(id) => id,
            None => {
                let name = unique(&names, &derived_name(op));
                o.insert("name".into(), json!(name));
                name
            }
        };
        names.push(name);
        if let Some(id) = &op.operation_id {
            o.insert("operation_id".into(), json!(id));
        }
        o.insert("method".into(), json!(op.method));
        o.insert("path".into(), json!(path));
        o.insert("bounds".into(), bounds.clone());
        operations.push(Value::Object(o));
    }
    operations
}

/// The base configuration (an empty one without BASE) with `operations` as
/// route `req.route`'s: the route's are replaced, or a new route is added
/// last. Returns the configuration and the route's index.
fn into_base(
    base: Option<Value>,
    operations: Vec<Value>,
    req: &OpenapiRequest,
    notes: &mut Vec<String>,
) -> Result<(Value, usize), Vec<Error>> {
    let mut root = match base {
        None => Value::Object(Map::new()),
        Some(v @ Value::Object(_)) => v,
        Some(_) => {
            return Err(vec![error(
                "--config",
                "is not a configuration (a JSON object)",
            )])
        }
    };
    let Some(obj) = root.as_object_mut() else {
        return Err(vec![error("--config", "is not a configuration")]);
    };
    let routes = obj.entry("routes").or_insert_with(|| json!([]));
    let Some(routes) = routes.as_array_mut() else {
        return Err(vec![error("--config", "its \"routes\" is not a list")]);
    };
    let existing = routes
        .iter()
        .position(|r| r.get("name").and_then(Value::as_str) == Some(req.route.as_str()));
    let index = match existing {
        Some(ri) => {
            replace_operations(&mut routes[ri], operations, req, notes)?;
            ri
        }
        None => {
            routes.push(new_route(operations, req, notes));
            routes.len() - 1
        }
    };
    Ok((root, index))
}

/// An existing route of the base gets `operations`; `--match-prefix` may
/// only say what it already has.
fn replace_operations(
    route: &mut Value,
    operations: Vec<Value>,
    req: &OpenapiRequest,
    notes: &mut Vec<String>,
) -> Result<(), Vec<Error>> {
    let prefix = route
        .get("match")
        .and_then(|m| m.get("path_prefix"))
        .and_then(Value::as_str);
    if let Some(want) = &req.match_prefix {
        if prefix != Some(want.as_str()) {
            return Err(vec![error(
                "--match-prefix",
                format!(
                    "route {:?} of the base configuration has match.path_prefix {}; --match-prefix {want:?} would change which requests it takes: drop the option or edit the base",
                    req.route,
                    prefix.map_or("(none)".to_string(), |p| format!("{p:?}"))
                ),
            )]);
        }
    }
    if let Some(old) = route.get("operations").and_then(Value::as_array) {
        if !old.is_empty() {
            notes.push(format!(
                "route {:?}: its {} operation(s) in the base configuration are replaced",
                req.route,
                old.len()
            ));
        }
    }
    if let Some(r) = route.as_object_mut() {
        r.insert("operations".into(), Value::Array(operations));
    }
    Ok(())
}

/// A new route for `operations`: it takes `--match-prefix`, or what the
/// operations' paths have in common.
fn new_route(operations: Vec<Value>, req: &OpenapiRequest, notes: &mut Vec<String>) -> Value {
    let prefix = match &req.match_prefix {
        Some(p) => p.clone(),
        None => {
            let paths = root_paths(&operations);
            let p = common_prefix(&paths.iter().map(String::as_str).collect::<Vec<_>>());
            notes.push(format!(
                "route {:?} is new: it takes paths starting with {p} (what the picked operations have in common); give --match-prefix to choose",
                req.route
            ));
            p
        }
    };
    json!({
        "name": req.route,
        "match": {"path_prefix": prefix},
        "operations": operations,
    })
}

/// The configuration made, through the filter's own parser; its errors
/// told against their source ([`blame`]).
fn read_back(
    root: Value,
    route: usize,
    picked: &[Picked],
    doc: &OpenapiDocument,
    req: &OpenapiRequest,
    notes: Vec<String>,
) -> Result<Generated, Vec<Error>> {
    let text = serde_json::to_vec(&root).unwrap_or_default();
    match config::parse(&text) {
        Ok(config) => Ok(Generated {
            json: root,
            config,
            notes,
        }),
        Err(errs) => Err(errs
            .into_iter()
            .map(|e| {
                // Line and column would point into the JSON made here.
                let message = input::without_json_location(&e.message).to_string();
                blame(
                    config::ConfigError { message, ..e },
                    route,
                    picked,
                    doc,
                    req,
                )
            })
            .collect()),
    }
}

fn root_paths(operations: &[Value]) -> Vec<String> {
    operations
        .iter()
        .filter_map(|o| o.get("path").and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// The literal segments all `paths` start with, as a prefix (`/` if none).
pub(super) fn common_prefix(paths: &[&str]) -> String {
    let split: Vec<Vec<&str>> = paths
        .iter()
        .map(|p| p.trim_matches('/').split('/').collect())
        .collect();
    let mut common: Vec<&str> = Vec::new();
    if let Some(first) = split.first() {
        for (k, seg) in first.iter().enumerate() {
            let literal = !seg.is_empty() && !seg.contains('{');
            if literal && split.iter().all(|s| s.get(k) == Some(seg)) {
                common.push(seg);
            } else {
                break;
            }
        }
    }
    format!("/{}", common.join("/"))
}

/// The path prefix its servers give an operation: they must agree.
fn prefix_of(op: &OpenapiOperation) -> Result<String, String> {
    let mut prefixes: Vec<String> = Vec::new();
    for s in &op.servers {
        let url = s.clone()?;
        let p = server_path(&url)?;
        if !prefixes.contains(&p) {
            prefixes.push(p);
        }
    }
    match prefixes.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(format!(
            "{}: its servers put it under different paths ({}); drop --servers and write the path in --match-prefix and the bounds file",
            op.title(),
            prefixes
                .iter()
                .map(|p| if p.is_empty() { "/".to_string() } else { p.clone() })
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// What a stat name may be (as the parser checks it).
fn stat_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A stat name for an operation whose operationId cannot be one:
/// the id made legal, else `post_orders_id_pay`.
fn derived_name(op: &OpenapiOperation) -> String {
    let source = match &op.operation_id {
        Some(id) => id.clone(),
        None => format!("{} {}", op.method.to_ascii_lowercase(), op.path),
    };
    let mut name = String::new();
    for c in source.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' {
            c
        } else {
            '_'
        };
        if !(c == '_' && (name.is_empty() || name.ends_with('_'))) {
            name.push(c);
        }
    }
    let name = name.trim_end_matches('_');
    let name: String = name.chars().take(60).collect();
    if name.is_empty() {
        "op".to_string()
    } else {
        name
    }
}

fn unique(taken: &[String], name: &str) -> String {
    if !taken.iter().any(|t| t == name) {
        return name.to_string();
    }
    (2..)
        .map(|n| format!("{name}_{n}"))
        .find(|c| !taken.contains(c))
        .unwrap_or_else(|| name.to_string())
}

/// An error of the configuration made, told against what the user wrote:
/// the bounds file for an operation's bounds, the document for its path.
fn blame(
    e: config::ConfigError,
    route: usize,
    picked: &[Picked],
    doc: &OpenapiDocument,
    req: &OpenapiRequest,
) -> Error {
    let ops = format!("$.routes[{route}].operations[");
    if let Some(rest) = e.path.strip_prefix(&ops) {
        if let Some((k, tail)) = rest.split_once(']') {
            if let Some(&(i, key, _)) = k.parse::<usize>().ok().and_then(|k| picked.get(k)) {
                if let Some(inner) = tail.strip_prefix(".bounds") {
                    return error(format!("{} {key:?}{inner}", req.bounds_label), e.message);
                }
                let op = &doc.operations[i];
                return error(
                    format!("{} {}", req.spec_label, op.title()),
                    format!("{} ({tail})", e.message),
                );
            }
        }
    }
    if e.path == format!("$.routes[{route}].name") {
        return error("--route", e.message);
    }
    if e.path == format!("$.routes[{route}].match.path_prefix") {
        return error("--match-prefix", e.message);
    }
    error(format!("the configuration made, {}", e.path), e.message)
}

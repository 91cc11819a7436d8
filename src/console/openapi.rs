//! `ratebound openapi`: an OpenAPI 3.0/3.1 document and a bounds file that
//! picks some of its operations become a route's `operations` in a filter
//! configuration. Only the operations picked: there is no default over the
//! whole inventory, and the filter never sees the document.
//!
//! The document is read in part: `openapi`, `servers`, and for each path
//! item its operations' `operationId` and `servers`; everything else
//! (schemas, descriptions, components) is skipped without being kept in
//! memory. A path item that is a `$ref` is not followed.
//!
//! The bounds file maps a pick to its bounds, the same bound objects as a
//! route's: a key is an `operationId`, or `"METHOD /path/template"` (a
//! method, one space, a path as the document writes it; parameter names
//! may differ). The configuration written goes through [`config::parse`]
//! before it is returned, and its errors are told against the bounds file.

use crate::config::operations::parse_template;
use crate::config::{self, Config};
use crate::console::input::{self, Format};
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::fmt;

/// Largest OpenAPI document read. Real documents run to several MiB; only
/// the operations are kept, so memory stays small whatever the size.
pub const MAX_DOCUMENT_BYTES: usize = 16 << 20;

/// The methods of an OpenAPI 3.0/3.1 path item, in the order it lists them.
pub const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// One problem, named where it is: `shop.yaml paths["/orders"].post`,
/// Where (`bounds.json "payOrder"[0].limit`, `--route`) and what: the same
/// shape as a configuration error.
pub type Error = config::ConfigError;

fn error(at: impl Into<String>, message: impl Into<String>) -> Error {
    Error {
        path: at.into(),
        message: message.into(),
    }
}

/// An operation of the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// In capitals.
    pub method: String,
    /// The path template as the document writes it.
    pub path: String,
    pub operation_id: Option<String>,
    /// The `servers` that apply to it (its own, its path item's, or the
    /// document's), as URLs with their variables' defaults put in.
    pub servers: Vec<Result<String, String>>,
}

impl Operation {
    /// "POST /orders/{id}/pay (payOrder)".
    pub fn title(&self) -> String {
        crate::console::words::operation(&self.method, &self.path, self.operation_id.as_deref())
    }
}

/// What is read of an OpenAPI document.
#[derive(Debug, Clone, Default)]
pub struct Document {
    pub version: String,
    pub operations: Vec<Operation>,
    /// Path items that are a `$ref` (not followed).
    pub references: Vec<String>,
}

// ---- reading the document ------------------------------------------------

/// A map read in order, its duplicate keys kept (JSON allows them; they
/// are told as errors where it matters).
#[derive(Debug, Clone)]
struct Ordered<T>(Vec<(String, T)>);

impl<T> Default for Ordered<T> {
    fn default() -> Self {
        Ordered(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Ordered<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Ordered<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::new();
                while let Some(k) = m.next_key::<String>()? {
                    v.push((k, m.next_value()?));
                }
                Ok(Ordered(v))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// `paths`: path items by template; `x-` extensions skipped.
#[derive(Debug, Default)]
struct Paths(Vec<(String, PathItem)>);

impl<'de> Deserialize<'de> for Paths {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Paths;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("the Paths Object: path items by path template")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Paths, A::Error> {
                let mut v = Vec::new();
                while let Some(k) = m.next_key::<String>()? {
                    if k.starts_with("x-") {
                        m.next_value::<IgnoredAny>()?;
                    } else {
                        let item = m.next_value()?;
                        v.push((k, item));
                    }
                }
                Ok(Paths(v))
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Debug, Deserialize)]
struct RawDocument {
    openapi: Option<Value>,
    swagger: Option<IgnoredAny>,
    servers: Option<Vec<RawServer>>,
    paths: Option<Paths>,
}

#[derive(Debug, Clone, Deserialize)]
struct RawServer {
    url: String,
    #[serde(default)]
    variables: Ordered<RawVariable>,
}

#[derive(Debug, Clone, Deserialize)]
struct RawVariable {
    default: String,
}

#[derive(Debug, Default, Deserialize)]
struct PathItem {
    #[serde(rename = "$ref")]
    reference: Option<String>,
    servers: Option<Vec<RawServer>>,
    get: Option<RawOperation>,
    put: Option<RawOperation>,
    post: Option<RawOperation>,
    delete: Option<RawOperation>,
    options: Option<RawOperation>,
    head: Option<RawOperation>,
    patch: Option<RawOperation>,
    trace: Option<RawOperation>,
}

#[derive(Debug, Deserialize)]
struct RawOperation {
    #[serde(rename = "operationId")]
    operation_id: Option<String>,
    servers: Option<Vec<RawServer>>,
}

/// Reads an OpenAPI 3.0 or 3.1 document (JSON or YAML, at most
/// [`MAX_DOCUMENT_BYTES`]), keeping its operations only. `label` names the
/// file in errors.
pub fn read_document(bytes: &[u8], format: Format, label: &str) -> Result<Document, Error> {
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(error(
            label,
            format!(
                "larger than {MAX_DOCUMENT_BYTES} bytes (16 MiB), the most that is read of an OpenAPI document"
            ),
        ));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|e| error(label, format!("not UTF-8 (byte {})", e.valid_up_to())))?;
    let raw: RawDocument = match format {
        Format::Json => {
            let mut de = serde_json::Deserializer::from_str(text);
            let raw = serde_path_to_error::deserialize(&mut de).map_err(|e| {
                let path = e.path().to_string();
                error(
                    if path == "." {
                        label.to_string()
                    } else {
                        format!("{label} {path}")
                    },
                    format!("not an OpenAPI document this can read: {}", e.inner()),
                )
            })?;
            de.end()
                .map_err(|e| error(label, format!("trailing characters: {e}")))?;
            raw
        }
        Format::Yaml => {
            serde_saphyr::from_str_with_options(text, input::document_options(MAX_DOCUMENT_BYTES))
                .map_err(|e| error(label, format!("not an OpenAPI document this can read: {e}")))?
        }
    };
    let version = match (&raw.openapi, &raw.swagger) {
        (Some(Value::String(s)), _) => s.clone(),
        (Some(Value::Number(n)), _) => n.to_string(),
        (Some(other), _) => {
            return Err(error(
                format!("{label} openapi"),
                format!("{other} is not a version; write e.g. \"3.1.0\""),
            ))
        }
        (None, Some(_)) => {
            return Err(error(
                label,
                "is a Swagger 2.0 document; only OpenAPI 3.0 and 3.1 are read (convert it first, e.g. with swagger2openapi)",
            ))
        }
        (None, None) => {
            return Err(error(
                label,
                "is not an OpenAPI document: it has no \"openapi\" version field",
            ))
        }
    };
    if !(version == "3.0"
        || version == "3.1"
        || version.starts_with("3.0.")
        || version.starts_with("3.1."))
    {
        return Err(error(
            format!("{label} openapi"),
            format!("OpenAPI {version} is not read; only 3.0 and 3.1 are"),
        ));
    }
    let top = servers(raw.servers.as_deref());
    let mut doc = Document {
        version,
        ..Document::default()
    };
    for (path, item) in raw.paths.unwrap_or_default().0 {
        if let Some(r) = &item.reference {
            doc.references.push(format!("{path} ($ref {r})"));
        }
        let item_servers = item.servers.as_deref().map(|s| servers(Some(s)));
        let ops = [
            item.get,
            item.put,
            item.post,
            item.delete,
            item.options,
            item.head,
            item.patch,
            item.trace,
        ];
        for (method, op) in METHODS.iter().zip(ops) {
            let Some(op) = op else { continue };
            let servers = match (&op.servers, &item_servers) {
                (Some(s), _) => servers(Some(s)),
                (None, Some(s)) => s.clone(),
                (None, None) => top.clone(),
            };
            doc.operations.push(Operation {
                method: method.to_ascii_uppercase(),
                path: path.clone(),
                operation_id: op.operation_id,
                servers,
            });
        }
    }
    Ok(doc)
}

/// Server URLs with their variables' defaults put in; no servers is `/`.
fn servers(list: Option<&[RawServer]>) -> Vec<Result<String, String>> {
    match list {
        None | Some([]) => vec![Ok("/".to_string())],
        Some(list) => list.iter().map(server_url).collect(),
    }
}

fn server_url(s: &RawServer) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s.url.as_str();
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| format!("server URL {:?} has an unclosed '{{'", s.url))?;
        let name = &after[..close];
        let value = s
            .variables
            .0
            .iter()
            .find(|(k, _)| k == name)
            .ok_or_else(|| {
                format!(
                    "server URL {:?} uses {{{name}}}, which it does not define",
                    s.url
                )
            })?;
        out.push_str(&value.1.default);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The path part of a server URL, without its trailing `/`: `""` for
/// `https://api.example.com`, `/v1` for `https://api.example.com/v1/`.
pub fn server_path(url: &str) -> Result<String, String> {
    let path = if let Some(at) = url.find("://") {
        let after = &url[at + 3..];
        after.find('/').map_or("", |p| &after[p..])
    } else if let Some(after) = url.strip_prefix("//") {
        after.find('/').map_or("", |p| &after[p..])
    } else if url.starts_with('/') {
        url
    } else {
        return Err(format!(
            "server URL {url:?} is relative to where the document is served; its path cannot be told"
        ));
    };
    let path = path.split(['?', '#']).next().unwrap_or("");
    Ok(path.trim_end_matches('/').to_string())
}

// ---- picks ----------------------------------------------------------------

/// How a key of the bounds file names an operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pick {
    Id(String),
    Route { method: String, path: String },
}

impl Pick {
    /// `"POST /orders/{id}/pay"` is a method and a path; anything else an
    /// operationId. A method that is not an OpenAPI one is an error.
    pub fn parse(key: &str) -> Result<Pick, String> {
        if let Some((m, p)) = key.split_once(' ') {
            if p.starts_with('/') && !m.is_empty() && m.bytes().all(|b| b.is_ascii_alphabetic()) {
                let lower = m.to_ascii_lowercase();
                if !METHODS.contains(&lower.as_str()) {
                    return Err(format!(
                        "{m} is not an OpenAPI operation method (one of {})",
                        METHODS.join(", ").to_ascii_uppercase()
                    ));
                }
                return Ok(Pick::Route {
                    method: lower.to_ascii_uppercase(),
                    path: p.trim().to_string(),
                });
            }
        }
        Ok(Pick::Id(key.to_string()))
    }
}

/// The bounds file: keys (picks) in the order written, each with its bounds
/// as written.
pub fn read_picks(
    bytes: &[u8],
    format: Format,
    label: &str,
) -> Result<Vec<(String, Value)>, Error> {
    let json = input::to_json(bytes, format).map_err(|e| error(label, e.message))?;
    let text = std::str::from_utf8(&json)
        .map_err(|e| error(label, format!("not UTF-8 (byte {})", e.valid_up_to())))?;
    let text = if text.trim().is_empty() { "{}" } else { text };
    let picks: Ordered<Value> = serde_json::from_str(text).map_err(|e| {
        error(
            label,
            format!("write a map from operationId (or \"METHOD /path\") to a list of bounds: {e}"),
        )
    })?;
    Ok(picks.0)
}

// ---- the configuration ----------------------------------------------------

/// What `ratebound openapi` was asked.
#[derive(Debug, Clone, Default)]
pub struct Request {
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
    doc: &Document,
    picks: &[(String, Value)],
    base: Option<Value>,
    req: &Request,
) -> Result<Generated, Vec<Error>> {
    let mut errors = Vec::new();
    let mut notes = Vec::new();
    let b = &req.bounds_label;
    let at_key = |key: &str| format!("{b} {key:?}");
    if picks.is_empty() {
        errors.push(error(
            b.as_str(),
            "picks no operation; map an operationId (or \"METHOD /path\") to its bounds",
        ));
    }
    duplicate_ids(doc, req, &mut notes);

    // Which operation each key picks.
    let mut picked: Vec<(usize, &str, &Value)> = Vec::new();
    let mut by_op: HashMap<usize, &str> = HashMap::new();
    let mut keys_seen: HashMap<&str, ()> = HashMap::new();
    for (key, bounds) in picks {
        if keys_seen.insert(key.as_str(), ()).is_some() {
            errors.push(error(at_key(key), "is written twice in the bounds file"));
            continue;
        }
        let found = match Pick::parse(key) {
            Err(m) => Err(m),
            Ok(Pick::Id(id)) => find_by_id(doc, &id, &req.spec_label),
            Ok(Pick::Route { method, path }) => find_by_route(doc, &method, &path, &req.spec_label),
        };
        match found {
            Err(m) => errors.push(error(at_key(key), m)),
            Ok(i) => {
                if let Some(first) = by_op.get(&i) {
                    errors.push(error(
                        at_key(key),
                        format!(
                            "picks {}, which {first:?} already picks; give each operation its bounds once",
                            doc.operations[i].title()
                        ),
                    ));
                } else {
                    by_op.insert(i, key.as_str());
                    picked.push((i, key.as_str(), bounds));
                }
            }
        }
    }

    // The operations, as the configuration writes them.
    let mut names: Vec<String> = Vec::new();
    let mut operations = Vec::new();
    for &(i, key, bounds) in &picked {
        let op = &doc.operations[i];
        let path = if req.servers {
            match prefix_of(op) {
                Ok(prefix) => format!("{prefix}{}", op.path),
                Err(m) => {
                    errors.push(error(at_key(key), m));
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
    if !errors.is_empty() {
        return Err(errors);
    }

    // Into the base configuration.
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
    let route_index = match existing {
        Some(ri) => {
            let route = &mut routes[ri];
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
            ri
        }
        None => {
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
            routes.push(json!({
                "name": req.route,
                "match": {"path_prefix": prefix},
                "operations": operations,
            }));
            routes.len() - 1
        }
    };

    // Through the filter's own parser; errors told against their source.
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
                    route_index,
                    &picked,
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
fn common_prefix(paths: &[&str]) -> String {
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
fn prefix_of(op: &Operation) -> Result<String, String> {
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

fn find_by_id(doc: &Document, id: &str, spec: &str) -> Result<usize, String> {
    let found: Vec<usize> = (0..doc.operations.len())
        .filter(|&i| doc.operations[i].operation_id.as_deref() == Some(id))
        .collect();
    match found.as_slice() {
        [one] => Ok(*one),
        [] => {
            let mut m = format!("no operation of {spec} has operationId {id:?}");
            if let Some(near) = nearest(doc, id) {
                m.push_str(&format!("; did you mean {near:?}?"));
            }
            if !doc.references.is_empty() {
                m.push_str(&format!(
                    " ({} path item(s) are a $ref, which is not followed: {})",
                    doc.references.len(),
                    doc.references.join(", ")
                ));
            }
            Err(m)
        }
        many => Err(format!(
            "operationId {id:?} occurs {} times in {spec} ({}); OpenAPI requires it to be unique: pick by \"METHOD /path\" instead, or fix the document",
            many.len(),
            many.iter()
                .map(|&i| format!("{} {}", doc.operations[i].method, doc.operations[i].path))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn find_by_route(doc: &Document, method: &str, path: &str, spec: &str) -> Result<usize, String> {
    let same_path = |p: &str| -> bool {
        p == path
            || match (parse_template(p), parse_template(path)) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            }
    };
    if let Some(i) = doc
        .operations
        .iter()
        .position(|o| o.method == method && o.path == path)
    {
        return Ok(i);
    }
    let found: Vec<usize> = (0..doc.operations.len())
        .filter(|&i| doc.operations[i].method == method && same_path(&doc.operations[i].path))
        .collect();
    match found.as_slice() {
        [one] => Ok(*one),
        [] => {
            let there: Vec<&str> = doc
                .operations
                .iter()
                .filter(|o| same_path(&o.path))
                .map(|o| o.method.as_str())
                .collect();
            Err(if there.is_empty() {
                format!("{spec} has no path {path}")
            } else {
                format!(
                    "{spec} has no {method} {path}: that path has {}",
                    there.join(", ")
                )
            })
        }
        many => Err(format!(
            "{method} {path} is {} paths of {spec} ({}); write the one meant",
            many.len(),
            many.iter()
                .map(|&i| doc.operations[i].path.clone())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Says once, as a note, that operationIds occur twice (picking them is an
/// error; leaving them alone is the document's business).
fn duplicate_ids(doc: &Document, req: &Request, notes: &mut Vec<String>) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for o in &doc.operations {
        if let Some(id) = &o.operation_id {
            *seen.entry(id.as_str()).or_default() += 1;
        }
    }
    let mut twice: Vec<&str> = seen
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(id, _)| id)
        .collect();
    twice.sort_unstable();
    if !twice.is_empty() {
        notes.push(format!(
            "{}: operationId {} occur(s) more than once; OpenAPI requires them to be unique",
            req.spec_label,
            twice
                .iter()
                .map(|id| format!("{id:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
}

/// The operationId closest to `id`, when close (case, or a few edits).
fn nearest<'a>(doc: &'a Document, id: &str) -> Option<&'a str> {
    doc.operations
        .iter()
        .filter_map(|o| o.operation_id.as_deref())
        .map(|c| {
            (
                distance(&c.to_ascii_lowercase(), &id.to_ascii_lowercase()),
                c,
            )
        })
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance, for suggestions.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
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
fn derived_name(op: &Operation) -> String {
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
    picked: &[(usize, &str, &Value)],
    doc: &Document,
    req: &Request,
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

#[cfg(test)]
mod tests {
    use super::*;

    const SHOP: &str = r#"{"openapi":"3.1.0","info":{"title":"shop","version":"1"},
      "servers":[{"url":"https://{region}.shop.example/api/{v}","variables":{"region":{"default":"eu"},"v":{"default":"v1"}}}],
      "paths":{
        "/orders":{"get":{"operationId":"listOrders"},"post":{"operationId":"createOrder"}},
        "/orders/mine":{"get":{"operationId":"listMyOrders"}},
        "/orders/{orderId}":{"get":{"operationId":"getOrder"},"delete":{}},
        "/orders/{orderId}/pay":{"post":{"operationId":"payOrder","servers":[{"url":"/pay"}]}},
        "/weird":{"get":{"operationId":"weird.op/v1"}},
        "/dup":{"get":{"operationId":"dup"},"put":{"operationId":"dup"}},
        "x-internal":{"anything":[1,2,3]}
      },
      "components":{"schemas":{"Order":{"type":"object"}}}}"#;

    fn doc() -> Document {
        read_document(SHOP.as_bytes(), Format::Json, "shop.json").unwrap()
    }

    fn req() -> Request {
        Request {
            route: "shop".into(),
            spec_label: "shop.json".into(),
            bounds_label: "bounds.json".into(),
            ..Request::default()
        }
    }

    fn picks(json: &str) -> Vec<(String, Value)> {
        read_picks(json.as_bytes(), Format::Json, "bounds.json").unwrap()
    }

    fn gen(json: &str, r: &Request) -> Result<Generated, Vec<String>> {
        generate(&doc(), &picks(json), None, r)
            .map_err(|e| e.iter().map(ToString::to_string).collect())
    }

    const B: &str = r#"[{"per":"address","limit":5,"window":"PT1M"}]"#;

    #[test]
    fn the_document_is_read_for_its_operations_only() {
        let d = doc();
        assert_eq!(d.version, "3.1.0");
        let titles: Vec<String> = d.operations.iter().map(Operation::title).collect();
        assert_eq!(
            titles,
            [
                "GET /orders (listOrders)",
                "POST /orders (createOrder)",
                "GET /orders/mine (listMyOrders)",
                "GET /orders/{orderId} (getOrder)",
                "DELETE /orders/{orderId}",
                "POST /orders/{orderId}/pay (payOrder)",
                "GET /weird (weird.op/v1)",
                "GET /dup (dup)",
                "PUT /dup (dup)",
            ]
        );
        assert_eq!(
            d.operations[0].servers,
            [Ok("https://eu.shop.example/api/v1".to_string())]
        );
    }

    #[test]
    fn picks_by_id_and_by_method_and_path() {
        let g = gen(
            &format!(r#"{{"payOrder":{B},"GET /orders/mine":{B},"delete /orders/{{id}}":{B},"weird.op/v1":{B}}}"#),
            &Request { match_prefix: Some("/orders".into()), ..req() },
        )
        .unwrap();
        let ops = &g.json["routes"][0]["operations"];
        assert_eq!(ops[0]["operation_id"], "payOrder");
        assert_eq!(ops[0]["path"], "/orders/{orderId}/pay");
        assert!(ops[0].get("name").is_none(), "the operationId names it");
        assert_eq!(ops[1]["operation_id"], "listMyOrders");
        assert_eq!(
            ops[2]["path"], "/orders/{orderId}",
            "as the document writes it"
        );
        assert_eq!(ops[2]["name"], "delete_orders_orderId");
        assert_eq!(ops[3]["name"], "weird_op_v1");
        assert_eq!(g.json["routes"][0]["match"]["path_prefix"], "/orders");
        assert_eq!(g.config.routes[0].operations.len(), 4);
        assert!(
            g.notes.iter().any(|n| n.contains("\"dup\"")),
            "{:?}",
            g.notes
        );
    }

    #[test]
    fn every_wrong_pick_is_named() {
        let e = gen(
            &format!(
                r#"{{"payOrders":{B},"dup":{B},"GET /orders/{{id}}/pay":{B},"GET /nowhere":{B},"FETCH /orders":{B},"getOrder":{B},"GET /orders/{{x}}":{B}}}"#
            ),
            &req(),
        )
        .unwrap_err();
        assert_eq!(
            e,
            [
                "bounds.json \"payOrders\": no operation of shop.json has operationId \"payOrders\"; did you mean \"payOrder\"?",
                "bounds.json \"dup\": operationId \"dup\" occurs 2 times in shop.json (GET /dup, PUT /dup); OpenAPI requires it to be unique: pick by \"METHOD /path\" instead, or fix the document",
                "bounds.json \"GET /orders/{id}/pay\": shop.json has no GET /orders/{id}/pay: that path has POST",
                "bounds.json \"GET /nowhere\": shop.json has no path /nowhere",
                "bounds.json \"FETCH /orders\": FETCH is not an OpenAPI operation method (one of GET, PUT, POST, DELETE, OPTIONS, HEAD, PATCH, TRACE)",
                "bounds.json \"GET /orders/{x}\": picks GET /orders/{orderId} (getOrder), which \"getOrder\" already picks; give each operation its bounds once",
            ]
        );
    }

    #[test]
    fn a_key_written_twice_and_an_empty_file_are_errors() {
        let p = picks(&format!(r#"{{"payOrder":{B},"payOrder":{B}}}"#));
        let e = generate(&doc(), &p, None, &req()).unwrap_err();
        assert_eq!(
            e[0].to_string(),
            "bounds.json \"payOrder\": is written twice in the bounds file"
        );
        let e = generate(&doc(), &picks("{}"), None, &req()).unwrap_err();
        assert!(e[0].message.starts_with("picks no operation"), "{e:?}");
        assert!(read_picks(b"[1,2]", Format::Json, "b").is_err());
    }

    #[test]
    fn bound_errors_are_told_against_the_bounds_file() {
        let e = gen(
            r#"{"payOrder":[{"per":"user","limit":0,"window":"PT1M"}]}"#,
            &req(),
        )
        .unwrap_err();
        assert!(
            e.iter()
                .any(|m| m.starts_with("bounds.json \"payOrder\"[0].limit: 0 is out of range")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|m| m.starts_with("bounds.json \"payOrder\"[0].per: needs a caller identity")),
            "{e:?}"
        );
        assert_eq!(e.len(), 2, "{e:?}");
        // A structural error stops the parser at the first.
        let e = gen(r#"{"listMyOrders":{"per":"address"}}"#, &req()).unwrap_err();
        assert_eq!(
            e,
            ["bounds.json \"listMyOrders\": invalid type: map, expected a sequence"]
        );
    }

    #[test]
    fn the_base_configuration_keeps_its_routes_and_gains_operations() {
        let base = json!({"instance":"shop","routes":[
            {"name":"health","match":{"path_prefix":"/health"},"bounds":[{"per":"route","limit":10,"window":"PT1S"}]},
            {"name":"shop","match":{"path_prefix":"/orders"},"bounds":[{"per":"address","limit":100,"window":"PT1M"}],
             "operations":[{"operation_id":"old","method":"GET","path":"/old","bounds":[{"per":"address","limit":1,"window":"PT1S"}]}]}]});
        let g = generate(
            &doc(),
            &picks(&format!(r#"{{"payOrder":{B}}}"#)),
            Some(base.clone()),
            &req(),
        )
        .unwrap();
        assert_eq!(g.json["routes"][0], base["routes"][0]);
        assert_eq!(g.json["routes"][1]["bounds"], base["routes"][1]["bounds"]);
        assert_eq!(
            g.json["routes"][1]["operations"].as_array().unwrap().len(),
            1
        );
        assert!(
            g.notes.iter().any(|n| n.contains("replaced")),
            "{:?}",
            g.notes
        );
        // --match-prefix may not change an existing route.
        let r = Request {
            match_prefix: Some("/api".into()),
            ..req()
        };
        let e = generate(
            &doc(),
            &picks(&format!(r#"{{"payOrder":{B}}}"#)),
            Some(base),
            &r,
        )
        .unwrap_err();
        assert_eq!(e[0].path, "--match-prefix");
    }

    #[test]
    fn a_new_route_takes_what_the_picks_have_in_common() {
        let g = gen(&format!(r#"{{"payOrder":{B},"getOrder":{B}}}"#), &req()).unwrap();
        assert_eq!(g.json["routes"][0]["match"]["path_prefix"], "/orders");
        let g = gen(&format!(r#"{{"payOrder":{B},"GET /dup":{B}}}"#), &req()).unwrap();
        assert_eq!(g.json["routes"][0]["match"]["path_prefix"], "/");
        assert_eq!(common_prefix(&["/orders/"]), "/orders");
        assert_eq!(common_prefix(&["/a/b/c", "/a/b/{x}"]), "/a/b");
        assert_eq!(common_prefix(&["/a/b", "/a/b/c"]), "/a/b");
        assert_eq!(common_prefix(&["/{tenant}/a"]), "/");
        let e = gen(
            &format!(r#"{{"payOrder":{B}}}"#),
            &Request {
                route: "a b".into(),
                ..req()
            },
        )
        .unwrap_err();
        assert!(
            e[0].starts_with("--route: must be 1-64 characters"),
            "{e:?}"
        );
    }

    #[test]
    fn servers_put_their_path_in_front_when_asked() {
        let r = Request {
            servers: true,
            ..req()
        };
        let g = gen(&format!(r#"{{"listMyOrders":{B},"payOrder":{B}}}"#), &r).unwrap();
        let ops = &g.json["routes"][0]["operations"];
        assert_eq!(ops[0]["path"], "/api/v1/orders/mine");
        assert_eq!(
            ops[1]["path"], "/pay/orders/{orderId}/pay",
            "the operation's own servers"
        );
        assert_eq!(server_path("https://h.example"), Ok(String::new()));
        assert_eq!(server_path("https://h.example/v1/"), Ok("/v1".into()));
        assert_eq!(server_path("//h/v2?x"), Ok("/v2".into()));
        assert_eq!(server_path("/"), Ok(String::new()));
        assert!(server_path("v1").is_err());
        let two = r#"{"openapi":"3.0.3","servers":[{"url":"/a"},{"url":"/b"}],"paths":{"/x":{"get":{"operationId":"x"}}}}"#;
        let d = read_document(two.as_bytes(), Format::Json, "two.json").unwrap();
        let e = generate(&d, &picks(&format!(r#"{{"x":{B}}}"#)), None, &r).unwrap_err();
        assert!(e[0].message.contains("different paths (/a, /b)"), "{e:?}");
        let bad = r#"{"openapi":"3.0.3","servers":[{"url":"/{v}"}],"paths":{"/x":{"get":{"operationId":"x"}}}}"#;
        let d = read_document(bad.as_bytes(), Format::Json, "bad.json").unwrap();
        let e = generate(&d, &picks(&format!(r#"{{"x":{B}}}"#)), None, &r).unwrap_err();
        assert!(
            e[0].message.contains("uses {v}, which it does not define"),
            "{e:?}"
        );
    }

    #[test]
    fn documents_that_are_not_openapi_3_are_refused_with_a_reason() {
        let e = |text: &str, f: Format| {
            read_document(text.as_bytes(), f, "d")
                .unwrap_err()
                .to_string()
        };
        assert!(e(r#"{"swagger":"2.0","paths":{}}"#, Format::Json).contains("Swagger 2.0"));
        assert!(e(r#"{"paths":{}}"#, Format::Json).contains("no \"openapi\" version field"));
        assert!(e(r#"{"openapi":"2.5"}"#, Format::Json).contains("OpenAPI 2.5 is not read"));
        assert!(e(
            r#"{"openapi":"3.1.0","paths":{"/a":{"get":{"operationId":7}}}}"#,
            Format::Json
        )
        .starts_with("d paths./a.get.operationId: "));
        assert!(e(r#"{"openapi":"3.1.0","paths":[]}"#, Format::Json).starts_with("d paths: "));
        assert!(e(
            "openapi: 3.1.0\npaths:\n  /a: {get: {operationId: [1]}}\n",
            Format::Yaml
        )
        .starts_with("d: not an OpenAPI document"));
        // YAML's unquoted version is a number.
        let d = read_document(
            b"openapi: 3.0\npaths:\n  /a:\n    get: {operationId: a}\n",
            Format::Yaml,
            "d",
        )
        .unwrap();
        assert_eq!(d.version, "3.0");
        assert_eq!(d.operations.len(), 1);
        // A $ref path item is said when a pick is not found.
        let d = read_document(
            br#"{"openapi":"3.1.0","paths":{"/a":{"$ref":"other.yaml#/a"}}}"#,
            Format::Json,
            "d",
        )
        .unwrap();
        let e = generate(&d, &picks(&format!(r#"{{"a":{B}}}"#)), None, &req()).unwrap_err();
        assert!(
            e[0].message
                .contains("$ref, which is not followed: /a ($ref other.yaml#/a)"),
            "{e:?}"
        );
    }

    #[test]
    fn hostile_documents_are_errors_not_panics() {
        let deep = format!(r#"{{"openapi":"3.1.0","x":{}}}"#, "[".repeat(100_000));
        assert!(read_document(deep.as_bytes(), Format::Json, "d").is_err());
        let deep_yaml = format!(
            "openapi: 3.1.0\nx: {}1{}\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(read_document(deep_yaml.as_bytes(), Format::Yaml, "d").is_err());
        let mut bomb = String::from(
            "openapi: 3.1.0\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
        );
        for w in ["a", "b", "c", "d", "e", "f", "g", "h", "i"].windows(2) {
            bomb.push_str(&format!(
                "{}: &{} [{}]\n",
                w[1],
                w[1],
                vec![format!("*{}", w[0]); 10].join(", ")
            ));
        }
        assert!(read_document(bomb.as_bytes(), Format::Yaml, "d").is_err());
        assert!(read_document(&[0xff, 0xfe], Format::Json, "d").is_err());
        assert!(read_document(&vec![b' '; MAX_DOCUMENT_BYTES + 1], Format::Json, "d").is_err());
        assert!(
            read_document(b"openapi: 3.1.0\n---\nopenapi: 3.1.0\n", Format::Yaml, "d").is_err()
        );
        assert!(read_document(b"openapi: 3.1.0\nopenapi: 3.1.0\n", Format::Yaml, "d").is_err());
    }
}

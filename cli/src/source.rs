//! What the CLI checks in a file: the configurations it holds, and where
//! each JSON path is in the text (line and column), so an error can be
//! shown where it is.
//!
//! A file is a configuration (JSON or YAML, with or without `$schema`), an
//! Istio `WasmPlugin` manifest (its `spec.pluginConfig` is the
//! configuration), or a stream of YAML documents (`kubectl kustomize`
//! output, `kind: List`): every WasmPlugin in it is a configuration, the
//! other documents are skipped with a note. A file of Kubernetes objects
//! none of which is a WasmPlugin (a Service, an EnvoyFilter) holds nothing
//! to check: each is skipped with a note, and the file is not an error.
//!
//! YAML is read as kubectl reads it (YAML 1.1, [`crate::yaml11`]),
//! each scalar that YAML 1.2 reads otherwise flagged in the document.
//!
//! The filter's own [`ratebound::config::parse`] still reads each configuration:
//! this only finds them and keeps the positions that turning YAML into JSON
//! loses.

use crate::input::Format;
use crate::stream::{EnvoyFilter, PluginVm, Workloads};
use crate::yaml11::{self, Flag};
use ratebound::config::{ConfigError, ErrorKind, MAX_CONFIG_BYTES};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use serde_saphyr::Spanned;
use std::collections::HashMap;
use std::fmt;

/// A line and a column, both from 1 (the column counts characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Position {
    pub line: u32,
    pub column: u32,
}

/// Where each JSON path of a document starts in the source text: its value,
/// and for an object member its key.
#[derive(Debug, Default, Clone)]
pub struct Locations {
    values: HashMap<String, Position>,
    keys: HashMap<String, Position>,
}

impl Locations {
    /// Where `path` is: the key of a member when `key`, else its value; a
    /// path that is not in the text (a missing field) is placed at the
    /// nearest enclosing one.
    pub fn find(&self, path: &str, key: bool) -> Option<Position> {
        let mut p = path;
        loop {
            let hit = if key {
                self.keys.get(p).or_else(|| self.values.get(p))
            } else {
                self.values.get(p)
            };
            if let Some(at) = hit {
                return Some(*at);
            }
            p = parent(p)?;
        }
    }
}

/// `$.a.b[2]` → `$.a.b`; `$` → none.
fn parent(path: &str) -> Option<&str> {
    let cut = path.rfind(['.', '['])?;
    Some(&path[..cut])
}

/// One configuration found in a file.
#[derive(Debug, Clone)]
pub struct Document {
    /// The document's place in the stream, from 1.
    pub index: usize,
    /// What holds it: `WasmPlugin istio-system/ratebound`; none for a file
    /// that is a configuration.
    pub holder: Option<String>,
    /// The JSON path of the configuration in its document: `$`, or
    /// `$.spec.pluginConfig`.
    pub at: String,
    /// The configuration as JSON text, for [`ratebound::config::parse`].
    pub json: Vec<u8>,
    /// Positions of the document's paths (from its root, not `at`).
    pub locations: Locations,
    /// A WasmPlugin's workloads (for the checks across a run).
    pub workloads: Option<Workloads>,
    /// A WasmPlugin's module and VM environment.
    pub vm: Option<PluginVm>,
    /// Scalars of the configuration kubectl (YAML 1.1) reads otherwise than
    /// YAML 1.2, at their paths in the configuration.
    pub yaml11: Vec<Flag>,
}

impl Document {
    /// Where the configuration's `path` (`$.routes[0]`) is in the file.
    pub fn position(&self, path: &str, key: bool) -> Option<Position> {
        let full = if self.at == "$" {
            path.to_string()
        } else {
            format!("{}{}", self.at, path.strip_prefix('$').unwrap_or(path))
        };
        self.locations.find(&full, key)
    }
}

/// The configurations of a file, the notes on what was skipped, or the
/// reason there is none (with where, when known).
#[derive(Debug, Clone, Default)]
pub struct Found {
    pub documents: Vec<Document>,
    pub notes: Vec<String>,
    /// The EnvoyFilters of the file, named `EnvoyFilter NS/NAME, document N`.
    pub envoy_filters: Vec<EnvoyFilter>,
}

/// A file that holds no configuration to check: unreadable syntax, a
/// manifest of another kind, a stream without a WasmPlugin.
#[derive(Debug, Clone)]
pub struct NotFound {
    pub error: ConfigError,
    pub position: Option<Position>,
    pub notes: Vec<String>,
}

fn not_found(message: impl Into<String>, position: Option<Position>) -> NotFound {
    NotFound {
        error: ConfigError {
            path: "$".into(),
            kind: ErrorKind::Text,
            message: message.into(),
        },
        position,
        notes: Vec::new(),
    }
}

/// How many documents a YAML stream may hold.
const MAX_DOCUMENTS: usize = 256;

/// The configurations in `bytes`.
pub fn find(bytes: &[u8], format: Format) -> Result<Found, NotFound> {
    if bytes.len() > MAX_CONFIG_BYTES {
        return Err(not_found(
            format!(
                "the file is larger than {MAX_CONFIG_BYTES} bytes (1 MiB), the most that is accepted"
            ),
            None,
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        not_found(
            format!("the file is not UTF-8 (byte {})", e.valid_up_to()),
            None,
        )
    })?;
    let docs: Vec<(Value, Locations, Vec<Flag>)> = match format {
        Format::Json => {
            let value: Value = if text.trim().is_empty() {
                Value::Object(Map::new())
            } else {
                serde_json::from_str(text).map_err(|e| {
                    not_found(
                        format!(
                            "not valid JSON: {}",
                            crate::input::without_json_location(&e.to_string())
                        ),
                        Some(Position {
                            line: u32::try_from(e.line()).unwrap_or(u32::MAX),
                            column: u32::try_from(e.column()).unwrap_or(u32::MAX),
                        }),
                    )
                })?
            };
            vec![(value, json_locations(text), Vec::new())]
        }
        Format::Yaml => yaml_documents(text)?,
    };
    // A whole JSON file that is a configuration goes to the parser as it
    // is written (duplicate keys, exact numbers).
    let whole = matches!(format, Format::Json);
    select(docs, whole.then_some(bytes))
}

/// Picks the configurations out of the documents.
fn select(
    docs: Vec<(Value, Locations, Vec<Flag>)>,
    whole: Option<&[u8]>,
) -> Result<Found, NotFound> {
    let mut found = Found::default();
    let stream = docs.len() > 1;
    if docs.is_empty() {
        // An empty file is an empty configuration.
        found.documents.push(Document {
            index: 1,
            holder: None,
            at: "$".into(),
            json: b"{}".to_vec(),
            locations: Locations::default(),
            workloads: None,
            vm: None,
            yaml11: Vec::new(),
        });
        return Ok(found);
    }
    let mut skipped = Vec::new();
    // A document that is neither a Kubernetes object nor a configuration.
    let mut stray = false;
    for (i, (value, locations, flags)) in docs.into_iter().enumerate() {
        let index = i + 1;
        let items: Vec<(Value, String)> = match manifest(&value) {
            Some(m) if m.kind == "List" => match value.get("items") {
                Some(Value::Array(items)) => items
                    .iter()
                    .enumerate()
                    .map(|(j, v)| (v.clone(), format!("$.items[{j}]")))
                    .collect(),
                _ => {
                    skipped.push(format!("document {index}: List with no items"));
                    Vec::new()
                }
            },
            _ => vec![(value, "$".to_string())],
        };
        for (value, base) in items {
            match manifest(&value) {
                None if !stream && base == "$" => {
                    let json = match whole {
                        Some(bytes) => bytes.to_vec(),
                        None => serde_json::to_vec(&value).unwrap_or_default(),
                    };
                    found.documents.push(Document {
                        index,
                        holder: None,
                        at: "$".into(),
                        json,
                        locations: locations.clone(),
                        workloads: None,
                        vm: None,
                        yaml11: under("$", &flags),
                    });
                }
                None => {
                    stray = true;
                    skipped.push(format!(
                        "document {index}{}: skipped, not a WasmPlugin (a configuration in a stream of documents must be a WasmPlugin's spec.pluginConfig)",
                        at_of(&base)
                    ));
                }
                Some(m) if m.plugin_config_at().is_some() => {
                    let path = m.plugin_config_at().unwrap_or_default();
                    let within = |keys: &[&str]| keys.iter().try_fold(&value, |v, key| v.get(key));
                    let given = within(path);
                    // The module's fields sit beside pluginConfig.
                    let module = path.split_last().and_then(|(_, parent)| within(parent));
                    let config = given.cloned().unwrap_or_else(|| Value::Object(Map::new()));
                    let dotted = path.join(".");
                    if given.is_none() {
                        found.notes.push(format!(
                            "document {index}{}: {} has no {dotted}: checked as an empty configuration",
                            at_of(&base),
                            m.label()
                        ));
                    }
                    let at = format!("{base}.{dotted}");
                    found.documents.push(Document {
                        index,
                        holder: Some(m.label()),
                        yaml11: under(&at, &flags),
                        at,
                        json: serde_json::to_vec(&config).unwrap_or_default(),
                        locations: locations.clone(),
                        workloads: Some(Workloads::of(&value)),
                        vm: Some(PluginVm::of(module)),
                    });
                }
                Some(m) => {
                    if m.kind == "EnvoyFilter" && m.api_version.starts_with("networking.istio.io/")
                    {
                        found.envoy_filters.push(EnvoyFilter::of(
                            format!("{}, document {index}", m.label()),
                            &value,
                        ));
                    }
                    skipped.push(format!(
                        "document {index}{}: {} skipped, not a WasmPlugin",
                        at_of(&base),
                        m.label()
                    ));
                }
            }
        }
    }
    // Kubernetes objects of other kinds only: nothing to check, no error
    // (a directory of manifests holds Services and EnvoyFilters too).
    if found.documents.is_empty() && !stray && !skipped.is_empty() {
        found.notes.extend(skipped);
        return Ok(found);
    }
    if found.documents.is_empty() {
        let mut e = if stream || skipped.iter().any(|s| !s.contains("a stream")) {
            not_found(
                "no ratebound configuration here: neither a configuration nor an Istio WasmPlugin (extensions.istio.io) with a spec.pluginConfig",
                None,
            )
        } else {
            not_found("no ratebound configuration here", None)
        };
        e.notes = skipped;
        return Err(e);
    }
    found.notes.extend(skipped);
    Ok(found)
}

fn at_of(base: &str) -> String {
    if base == "$" {
        String::new()
    } else {
        format!(" ({base})")
    }
}

/// The flags at or under the configuration's path `at`, with paths from
/// the configuration (`$.spec.pluginConfig.shadow` → `$.shadow`).
fn under(at: &str, flags: &[Flag]) -> Vec<Flag> {
    flags
        .iter()
        .filter_map(|f| {
            let rest = f.path.strip_prefix(at)?;
            (rest.is_empty() || rest.starts_with(['.', '['])).then(|| Flag {
                path: format!("${rest}"),
                ..f.clone()
            })
        })
        .collect()
}

/// A Kubernetes object's identity: any document with a string `apiVersion`
/// and `kind` (a configuration has neither field).
struct Manifest {
    api_version: String,
    kind: String,
    name: Option<String>,
    namespace: Option<String>,
}

impl Manifest {
    /// Where the object holds a ratebound configuration: a WasmPlugin's
    /// `spec.pluginConfig`, or a TrafficExtension's `spec.wasm.pluginConfig`
    /// (the API Istio's proto says supersedes WasmPlugin, and what istiod
    /// translates each WasmPlugin into).
    fn plugin_config_at(&self) -> Option<&'static [&'static str]> {
        if !self.api_version.starts_with("extensions.istio.io/") {
            return None;
        }
        match self.kind.as_str() {
            "WasmPlugin" => Some(&["spec", "pluginConfig"]),
            "TrafficExtension" => Some(&["spec", "wasm", "pluginConfig"]),
            _ => None,
        }
    }

    fn label(&self) -> String {
        match (&self.namespace, &self.name) {
            (Some(ns), Some(n)) => format!("{} {ns}/{n}", self.kind),
            (None, Some(n)) => format!("{} {n}", self.kind),
            _ => self.kind.clone(),
        }
    }
}

fn manifest(v: &Value) -> Option<Manifest> {
    let api_version = v.get("apiVersion")?.as_str()?.to_string();
    let kind = v.get("kind")?.as_str()?.to_string();
    let meta = v.get("metadata");
    let field = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Some(Manifest {
        api_version,
        kind,
        name: field("name"),
        namespace: field("namespace"),
    })
}

// ---- YAML: every document, with the position of every node ----

/// A YAML node with the position of each child (and of each mapping key).
enum YamlNode {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<YamlNode>>),
    Map(Vec<(Spanned<Key>, Spanned<YamlNode>)>),
}

/// A mapping key as text (YAML allows numbers and booleans as keys).
struct Key(String);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a mapping key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for YamlNode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = YamlNode;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a YAML value")
            }
            fn visit_unit<E: de::Error>(self) -> Result<YamlNode, E> {
                Ok(YamlNode::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<YamlNode, E> {
                Ok(YamlNode::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<YamlNode, D::Error> {
                YamlNode::deserialize(d)
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<YamlNode, E> {
                Ok(YamlNode::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<YamlNode, E> {
                Ok(YamlNode::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<YamlNode, E> {
                Ok(YamlNode::UInt(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<YamlNode, E> {
                Ok(YamlNode::Float(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<YamlNode, E> {
                Ok(YamlNode::Str(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<YamlNode, E> {
                Ok(YamlNode::Str(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<YamlNode, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Spanned<YamlNode>>()? {
                    items.push(item);
                }
                Ok(YamlNode::Seq(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<YamlNode, A::Error> {
                let mut entries = Vec::new();
                while let Some(k) = map.next_key::<Spanned<Key>>()? {
                    let v = map.next_value::<Spanned<YamlNode>>()?;
                    entries.push((k, v));
                }
                Ok(YamlNode::Map(entries))
            }
        }
        d.deserialize_any(V)
    }
}

fn position(l: &serde_saphyr::Location) -> Option<Position> {
    let line = u32::try_from(l.line()).ok()?;
    let column = u32::try_from(l.column()).ok()?;
    (line > 0).then_some(Position { line, column })
}

/// What turning a YAML node into JSON records: positions, and the plain
/// scalars kubectl reads otherwise (read its way, flagged).
struct Reading<'a> {
    out: &'a mut Locations,
    /// Untagged plain scalars by byte offset (empty: no kubectl reading).
    plain: &'a HashMap<usize, String>,
    flags: &'a mut Vec<Flag>,
}

/// The plain text of the scalar at `l`, when it is an untagged plain one.
fn plain_text<'a>(
    plain: &'a HashMap<usize, String>,
    l: &serde_saphyr::Location,
) -> Option<&'a str> {
    let offset = usize::try_from(l.span().byte_offset()?).ok()?;
    plain.get(&offset).map(String::as_str)
}

/// The node as JSON, recording positions under `path`.
fn to_json(node: Spanned<YamlNode>, path: &str, r: &mut Reading) -> Value {
    if let Some(p) = position(&node.referenced) {
        r.out.values.insert(path.to_string(), p);
    }
    let value = match node.value {
        YamlNode::Null => Value::Null,
        YamlNode::Bool(b) => Value::Bool(b),
        YamlNode::Int(i) => Value::from(i),
        YamlNode::UInt(u) => Value::from(u),
        YamlNode::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        YamlNode::Str(s) => Value::String(s),
        YamlNode::Seq(items) => {
            return Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| to_json(item, &format!("{path}[{i}]"), r))
                    .collect(),
            )
        }
        YamlNode::Map(entries) => {
            let mut map = Map::new();
            for (k, v) in entries {
                let name = match plain_text(r.plain, &k.defined) {
                    Some(text) => {
                        let (name, flag) = yaml11::key(text, path);
                        r.flags.extend(flag);
                        name
                    }
                    None => k.value.0,
                };
                let child = format!("{path}.{name}");
                if let Some(p) = position(&k.referenced) {
                    r.out.keys.insert(child.clone(), p);
                }
                let v = to_json(v, &child, r);
                map.insert(name, v);
            }
            return Value::Object(map);
        }
    };
    match plain_text(r.plain, &node.defined) {
        Some(text) => {
            let (value, flag) = yaml11::value(text, &value, path);
            r.flags.extend(flag);
            value
        }
        None => value,
    }
}

fn yaml_documents(text: &str) -> Result<Vec<(Value, Locations, Vec<Flag>)>, NotFound> {
    let options = crate::input::yaml_options(MAX_DOCUMENTS);
    let nodes: Vec<Spanned<YamlNode>> = serde_saphyr::from_multiple_with_options(text, options)
        .map_err(|e| {
            let at = e.location().as_ref().and_then(position);
            not_found(format!("not valid YAML: {}", yaml_message(&e)), at)
        })?;
    // The same text again, as events: which scalars are plain (serde
    // hides how a scalar was written).
    let plain = yaml11::plain_scalars(text).unwrap_or_default();
    let mut docs = Vec::new();
    let mut size = 0usize;
    for node in nodes {
        let mut locations = Locations::default();
        let mut flags = Vec::new();
        let mut reading = Reading {
            out: &mut locations,
            plain: &plain,
            flags: &mut flags,
        };
        let value = to_json(node, "$", &mut reading);
        // Aliases expand: the JSON must still fit the budget.
        size += serde_json::to_vec(&value).map_or(usize::MAX, |j| j.len());
        if size > MAX_CONFIG_BYTES {
            return Err(not_found(
                format!(
                    "the YAML, as JSON (aliases expanded), is larger than {MAX_CONFIG_BYTES} bytes (1 MiB), the most that is accepted"
                ),
                None,
            ));
        }
        docs.push((value, locations, flags));
    }
    Ok(docs)
}

/// serde-saphyr's message without the snippet it draws itself (we draw
/// ours) and without its location (we show it).
fn yaml_message(e: &serde_saphyr::Error) -> String {
    let s = e.to_string();
    let first = s.lines().next().unwrap_or_default().trim();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    match first.rfind(" at line ") {
        Some(i) => first[..i].to_string(),
        None => first.to_string(),
    }
}

// ---- JSON: the position of every path, by a small scanner ----

/// Positions of every value and key of a JSON text (the text has already
/// been parsed, or is about to be: a malformed text just stops the scan).
pub fn json_locations(text: &str) -> Locations {
    let mut s = Scanner {
        b: text.as_bytes(),
        text,
        i: 0,
        lines: line_starts(text),
        out: Locations::default(),
    };
    s.ws();
    s.value("$".to_string(), 0);
    s.out
}

fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

struct Scanner<'a> {
    b: &'a [u8],
    text: &'a str,
    i: usize,
    lines: Vec<usize>,
    out: Locations,
}

impl Scanner<'_> {
    fn at(&self) -> Position {
        let line = self.lines.partition_point(|&s| s <= self.i).max(1);
        let start = self.lines.get(line - 1).copied().unwrap_or(0);
        let column = self
            .text
            .get(start..self.i)
            .map_or(1, |s| s.chars().count() + 1);
        Position {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            column: u32::try_from(column).unwrap_or(u32::MAX),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.i += 1;
        }
    }

    /// Skips a string starting at `"`; returns its raw content.
    fn string(&mut self) -> Option<String> {
        let start = self.i + 1;
        self.i += 1;
        loop {
            match self.peek()? {
                b'\\' => self.i += 2,
                b'"' => {
                    let raw = self.text.get(start..self.i)?;
                    self.i += 1;
                    // Keys of a configuration have no escapes; decode anyway.
                    return Some(
                        serde_json::from_str::<String>(&format!("\"{raw}\""))
                            .unwrap_or_else(|_| raw.to_string()),
                    );
                }
                _ => self.i += 1,
            }
        }
    }

    fn value(&mut self, path: String, depth: usize) -> Option<()> {
        if depth > 128 {
            return None;
        }
        let here = self.at();
        self.out.values.insert(path.clone(), here);
        match self.peek()? {
            b'{' => {
                self.i += 1;
                loop {
                    self.ws();
                    match self.peek()? {
                        b'}' => {
                            self.i += 1;
                            return Some(());
                        }
                        b',' => self.i += 1,
                        b'"' => {
                            let key_at = self.at();
                            let key = self.string()?;
                            let child = format!("{path}.{key}");
                            self.out.keys.insert(child.clone(), key_at);
                            self.ws();
                            if self.peek()? != b':' {
                                return None;
                            }
                            self.i += 1;
                            self.ws();
                            self.value(child, depth + 1)?;
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let mut n = 0;
                loop {
                    self.ws();
                    match self.peek()? {
                        b']' => {
                            self.i += 1;
                            return Some(());
                        }
                        b',' => self.i += 1,
                        _ => {
                            self.value(format!("{path}[{n}]"), depth + 1)?;
                            n += 1;
                        }
                    }
                }
            }
            b'"' => self.string().map(|_| ()),
            _ => {
                while !matches!(
                    self.peek(),
                    None | Some(b',' | b']' | b'}' | b' ' | b'\t' | b'\r' | b'\n')
                ) {
                    self.i += 1;
                }
                Some(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(line: u32, column: u32) -> Option<Position> {
        Some(Position { line, column })
    }

    #[test]
    fn json_paths_have_their_lines_and_columns() {
        let text =
            "{\n  \"routes\": [\n    {\"name\": \"a\", \"bounds\": [{\"limit\": 0}]}\n  ]\n}\n";
        let l = json_locations(text);
        assert_eq!(l.find("$.routes", false), at(2, 13));
        assert_eq!(l.find("$.routes[0].name", false), at(3, 14));
        assert_eq!(l.find("$.routes[0].name", true), at(3, 6));
        assert_eq!(l.find("$.routes[0].bounds[0].limit", false), at(3, 40));
        // A missing member is placed at what would hold it.
        assert_eq!(
            l.find("$.routes[0].bounds[0].window", false),
            l.find("$.routes[0].bounds[0]", false)
        );
    }

    #[test]
    fn yaml_paths_have_their_lines_and_columns() {
        let f = find(
            b"routes:\n  - name: a\n    bounds:\n      - per: ip\n        limit: 0\n",
            Format::Yaml,
        )
        .unwrap();
        let d = &f.documents[0];
        assert_eq!(d.position("$.routes[0].bounds[0].per", false), at(4, 14));
        assert_eq!(d.position("$.routes[0].bounds[0].limit", true), at(5, 9));
    }

    #[test]
    fn a_traffic_extension_is_its_wasm_plugin_config() {
        let yaml = "apiVersion: extensions.istio.io/v1alpha1\nkind: TrafficExtension\nmetadata: {name: rb, namespace: istio-system}\nspec:\n  selector: {matchLabels: {istio: ingressgateway}}\n  wasm:\n    url: oci://r/rb:1\n    pluginConfig:\n      routes:\n        - name: a\n          bounds: [{per: ip, limit: 1, window: PT1M}]\n---\napiVersion: extensions.istio.io/v1alpha1\nkind: TrafficExtension\nmetadata: {name: empty}\nspec: {wasm: {url: oci://r/x:1}}\n";
        let f = find(yaml.as_bytes(), Format::Yaml).unwrap();
        assert_eq!(f.documents.len(), 2);
        let d = &f.documents[0];
        assert_eq!(
            d.holder.as_deref(),
            Some("TrafficExtension istio-system/rb")
        );
        assert_eq!(d.at, "$.spec.wasm.pluginConfig");
        assert_eq!(d.position("$.routes[0].bounds[0].per", false), at(11, 26));
        let v: Value = serde_json::from_slice(&d.json).unwrap();
        assert_eq!(v["routes"][0]["name"], "a");
        assert!(d.workloads.is_some());
        let vm = d.vm.as_ref().unwrap();
        assert_eq!(vm.url.as_deref(), Some("oci://r/rb:1"));
        assert!(
            f.notes.iter().any(|n| n.contains(
                "TrafficExtension empty has no spec.wasm.pluginConfig: checked as an empty configuration"
            )),
            "{:?}",
            f.notes
        );
    }

    #[test]
    fn a_wasm_plugin_is_its_plugin_config_and_a_stream_keeps_only_wasm_plugins() {
        let yaml = "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n---\napiVersion: extensions.istio.io/v1alpha1\nkind: WasmPlugin\nmetadata: {name: rb, namespace: istio-system}\nspec:\n  pluginConfig:\n    routes:\n      - name: a\n        bounds: [{per: ip, limit: 1, window: PT1M}]\n";
        let f = find(yaml.as_bytes(), Format::Yaml).unwrap();
        assert_eq!(f.documents.len(), 1);
        let d = &f.documents[0];
        assert_eq!(d.index, 2);
        assert_eq!(d.holder.as_deref(), Some("WasmPlugin istio-system/rb"));
        assert_eq!(d.at, "$.spec.pluginConfig");
        assert_eq!(d.position("$.routes[0].bounds[0].per", false), at(12, 24));
        assert!(f.notes[0].contains("Namespace x skipped"), "{:?}", f.notes);
        let v: Value = serde_json::from_slice(&d.json).unwrap();
        assert_eq!(v["routes"][0]["name"], "a");
    }

    #[test]
    fn a_stream_of_plain_documents_is_refused_and_other_kinds_are_skipped() {
        assert!(find(b"a: 1\n---\nb: 2\n", Format::Yaml).is_err());
        // Kubernetes objects of other kinds: nothing to check, not an error.
        let f = find(
            b"apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\n",
            Format::Yaml,
        )
        .unwrap();
        assert!(f.documents.is_empty());
        assert_eq!(
            f.notes,
            ["document 1: Service shop/web skipped, not a WasmPlugin"]
        );
        let f = find(
            br#"{"apiVersion": "v1", "kind": "ConfigMap"}"#,
            Format::Json,
        )
        .unwrap();
        assert!(f.notes[0].contains("ConfigMap skipped"), "{:?}", f.notes);
        // An object of another kind beside a document that is none: refused.
        assert!(find(b"apiVersion: v1\nkind: Service\n---\nb: 2\n", Format::Yaml).is_err());
    }

    #[test]
    fn the_envoy_filters_of_a_stream_and_the_workloads_of_its_plugins_are_kept() {
        let stream = format!(
            "{}---\n{}",
            std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../envoy-demo/istio/envoyfilter-rls.yaml"
            ))
            .unwrap(),
            std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../envoy-demo/istio/wasmplugin-installation.yaml"
            ))
            .unwrap()
        );
        let f = find(stream.as_bytes(), Format::Yaml).unwrap();
        assert_eq!(f.envoy_filters.len(), 1);
        assert_eq!(
            f.envoy_filters[0].name,
            "EnvoyFilter istio-system/ratebound-rls, document 1"
        );
        assert_eq!(f.envoy_filters[0].clusters, ["ratebound-rls"]);
        let w = f.documents[0].workloads.as_ref().unwrap();
        assert_eq!(w.namespace.as_deref(), Some("istio-system"));
        assert_eq!(w.labels.as_ref().unwrap()["istio"], "ingressgateway");
    }

    #[test]
    fn yaml_is_read_as_kubectl_reads_it_and_differences_are_flagged_in_the_configuration() {
        let yaml = "apiVersion: extensions.istio.io/v1alpha1\nkind: WasmPlugin\nmetadata: {name: rb, labels: {on: x}}\nspec:\n  pluginConfig:\n    shadow: yes\n    routes:\n      - name: a\n        bounds: [{per: address, limit: 0100, window: PT1M}]\n";
        let f = find(yaml.as_bytes(), Format::Yaml).unwrap();
        let d = &f.documents[0];
        let v: Value = serde_json::from_slice(&d.json).unwrap();
        assert_eq!(v["shadow"], true);
        assert_eq!(v["routes"][0]["bounds"][0]["limit"], 64);
        // Only the configuration's flags, at their paths in it (the
        // metadata's `on` key is not the configuration's).
        let flags: Vec<(&str, bool)> = d
            .yaml11
            .iter()
            .map(|f| (f.path.as_str(), f.error))
            .collect();
        assert_eq!(
            flags,
            [("$.shadow", false), ("$.routes[0].bounds[0].limit", true)]
        );
        assert_eq!(d.position("$.shadow", false), at(6, 13));
        // A key: `on` is "true", at the key's place.
        let f = find(b"routes: []\non: 1\n", Format::Yaml).unwrap();
        let d = &f.documents[0];
        assert_eq!(d.yaml11[0].path, "$.true");
        assert!(d.yaml11[0].error);
        assert_eq!(d.position("$.true", true), at(2, 1));
        // Quoted, tagged or JSON: as written.
        for text in ["shadow: 'yes'\n", "shadow: !!str yes\n"] {
            let f = find(text.as_bytes(), Format::Yaml).unwrap();
            assert!(f.documents[0].yaml11.is_empty(), "{text}");
        }
    }

    #[test]
    fn yaml_syntax_errors_have_a_position() {
        let e = find(b"routes:\n  - name: a\n   bad: [\n", Format::Yaml).unwrap_err();
        assert!(e.position.is_some(), "{e:?}");
        let e = find(b"{\"routes\": [}", Format::Json).unwrap_err();
        assert_eq!(e.position, at(1, 13));
    }
}

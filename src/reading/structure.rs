//! Every problem of a configuration at once, in its own words.
//!
//! [`crate::config::parse`] (shared with the filter, kept lean) stops at the
//! first error of structure: a `per: ip` hides everything after it. The CLI
//! first checks the configuration against its JSON Schema, which reports
//! every structural problem in one pass; those are said in the
//! configuration's words (`limit must be a whole number from 1 to …`, never
//! `expected u64`). The members at fault are then taken out and the rest
//! goes through `parse` again, so the checks that only the parser makes
//! (unique names, windows, identity sources) are reported too.

use crate::config::{self, Config, ConfigError, ErrorKind, WrittenConfig};
use crate::reading::{schema, words};
use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::LocationSegment;
use jsonschema::ValidationError;
use serde_json::Value;
use std::sync::OnceLock;

/// Parses a JSON configuration (as [`config::parse`]) and, when it is
/// invalid, reports every problem found, each once.
pub fn parse(json: &[u8]) -> Result<Config, Vec<ConfigError>> {
    let first = match config::parse(json) {
        Ok(c) => return Ok(c),
        Err(errors) => plain(errors),
    };
    let Ok(mut value) = serde_json::from_slice::<Value>(json) else {
        return Err(first);
    };
    let schema = schema_errors(&value);
    let mut all: Vec<ConfigError> = Vec::new();
    let mut said = vec![false; schema.len()];
    let mut stand_ins: Vec<String> = Vec::new();
    // The parser decides; the schema words what it says about structure.
    // Each structural error's member is taken out and the rest parsed again,
    // until the structure holds and the parser's own checks run.
    for _ in 0..64 {
        let structural: Result<WrittenConfig, _> = serde_path_to_error::deserialize(&value);
        let e = match structural {
            Ok(_) => {
                let rest = serde_json::to_vec(&value).unwrap_or_default();
                if let Err(errors) = config::parse(&rest) {
                    all.extend(plain(errors));
                }
                break;
            }
            Err(e) => e,
        };
        let path = serde_path(&e.path().to_string());
        let message = e.inner().to_string();
        let unknown = message
            .strip_prefix("unknown field `")
            .and_then(|m| m.split('`').next())
            .map(str::to_string);
        let mut worded = false;
        for (k, (s, _)) in schema.iter().enumerate() {
            let same = match &unknown {
                Some(u) => s.path == path && s.message.starts_with(&format!("unknown field `{u}`")),
                None => s.path == path,
            };
            if same {
                worded = true;
                if !said[k] {
                    said[k] = true;
                    all.push(s.clone());
                }
            }
        }
        if !worded {
            all.push(ConfigError {
                path: path.clone(),
                kind: ErrorKind::of_serde(e.inner()),
                message: plain_message(&message),
            });
        }
        let mut segments = segments_of(&value, &path);
        let repaired = if let Some(u) = unknown {
            if segments.last() != Some(&u) {
                segments.push(u);
            }
            remove_member(&mut value, &segments)
        } else {
            if let Some(field) = message
                .strip_prefix("missing field `")
                .and_then(|m| m.split('`').next())
            {
                segments.push(field.to_string());
            }
            // A stand-in of the right shape, so the rest can be parsed; what
            // the parser then says about it is not reported.
            match root_schema().and_then(|r| placeholder(r, &value, &segments)) {
                Some(v) => {
                    stand_ins.push(path_of(&segments));
                    set_member(&mut value, &segments, v)
                }
                None => false,
            }
        };
        if !repaired {
            // The schema's errors say the rest.
            break;
        }
    }
    all.retain(|e| {
        !stand_ins.iter().any(|p| {
            (e.path == *p
                || e.path.starts_with(&format!("{p}."))
                || e.path.starts_with(&format!("{p}[")))
                && !said_at(&schema, &said, &e.path, &e.message)
        })
    });
    // Structural problems the parser did not reach.
    for (k, (s, _)) in schema.iter().enumerate() {
        if !said[k] && !all.iter().any(|a| a.path == s.path) && is_structural(s) {
            all.push(s.clone());
        }
    }
    if all.is_empty() {
        return Err(first);
    }
    Err(all)
}

/// Whether `message` at `path` is one of the schema's errors already said.
fn said_at(
    schema: &[(ConfigError, Option<Vec<String>>)],
    said: &[bool],
    path: &str,
    message: &str,
) -> bool {
    schema
        .iter()
        .zip(said)
        .any(|((s, _), &done)| done && s.path == path && s.message == message)
}

/// `routes`, `0`, `per` as `$.routes[0].per` (numbers are list indexes:
/// configuration keys are never numbers).
fn path_of(segments: &[String]) -> String {
    let mut p = String::from("$");
    for s in segments {
        if s.bytes().all(|b| b.is_ascii_digit()) && !s.is_empty() {
            p.push_str(&format!("[{s}]"));
        } else {
            p.push('.');
            p.push_str(s);
        }
    }
    p
}

/// A value the schema accepts at `segments` (its first constant, its
/// default, the least number, an empty text, list or object).
fn placeholder(root: &Value, value: &Value, segments: &[String]) -> Option<Value> {
    let s = subschema(root, value, segments)?;
    if let Some(c) = consts_of(s).into_iter().next() {
        return Some(c);
    }
    if let Some(d) = s.get("default").filter(|d| !d.is_null()) {
        return Some(d.clone());
    }
    let t = match s.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null")
            .to_string(),
        _ => return None,
    };
    Some(match t.as_str() {
        "integer" | "number" => s.get("minimum").cloned().unwrap_or(Value::from(1)),
        "boolean" => Value::Bool(false),
        "string" => Value::String(String::new()),
        "array" => Value::Array(Vec::new()),
        "object" => Value::Object(serde_json::Map::new()),
        _ => Value::Null,
    })
}

fn set_member(value: &mut Value, segments: &[String], v: Value) -> bool {
    let Some((last, parent)) = segments.split_last() else {
        return false;
    };
    match parent_mut(value, parent) {
        Some(Value::Object(o)) => {
            o.insert(last.clone(), v);
            true
        }
        Some(Value::Array(items)) => {
            match last.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                Some(slot) => {
                    *slot = v;
                    true
                }
                None => false,
            }
        }
        _ => false,
    }
}

/// What the schema says that the parser would too, at that place: wrong
/// types, unknown values and fields, missing fields. (Patterns and ranges
/// are the parser's, in its words.)
fn is_structural(e: &ConfigError) -> bool {
    e.kind.is_structural()
}

/// serde_path_to_error's `routes[0].per` as `$.routes[0].per`.
fn serde_path(p: &str) -> String {
    if p == "." || p.is_empty() {
        "$".to_string()
    } else if p.starts_with('[') {
        format!("${p}")
    } else {
        format!("$.{p}")
    }
}

/// `$.routes[0].per` as segments `routes`, `0`, `per`.
fn segments_of(_value: &Value, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let rest = path.strip_prefix('$').unwrap_or(path);
    for part in rest.split('.').filter(|p| !p.is_empty()) {
        let mut it = part.split('[');
        if let Some(name) = it.next() {
            if !name.is_empty() {
                out.push(name.to_string());
            }
        }
        for idx in it {
            out.push(idx.trim_end_matches(']').to_string());
        }
    }
    out
}

/// serde's words for types, in the configuration's: `u64` is a whole number.
fn plain(errors: Vec<ConfigError>) -> Vec<ConfigError> {
    errors
        .into_iter()
        .map(|e| ConfigError {
            message: plain_message(&e.message),
            ..e
        })
        .collect()
}

fn plain_message(m: &str) -> String {
    let m = without_json_location(m);
    let mut s = m.to_string();
    for (rust, said) in [
        ("expected u64", "expected a whole number"),
        ("expected u32", "expected a whole number"),
        ("expected u16", "expected a whole number"),
        ("expected u8", "expected a whole number"),
        ("expected usize", "expected a whole number"),
        ("expected i64", "expected a whole number"),
        ("expected i32", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected a boolean", "expected true or false"),
        ("expected a sequence", "expected a list"),
        ("expected a map", "expected an object"),
        ("expected struct ", "expected an object: "),
        ("invalid type: string", "invalid type: text"),
        ("invalid type: integer", "invalid type: number"),
        ("invalid type: sequence", "invalid type: list"),
        ("invalid type: map", "invalid type: object"),
        ("invalid type: floating point", "invalid type: number"),
    ] {
        s = s.replace(rust, said);
    }
    s
}

fn validator() -> Option<&'static jsonschema::Validator> {
    static V: OnceLock<Option<jsonschema::Validator>> = OnceLock::new();
    V.get_or_init(|| {
        let schema: Value = serde_json::from_str(&schema::text()).ok()?;
        jsonschema::validator_for(&schema).ok()
    })
    .as_ref()
}

fn root_schema() -> Option<&'static Value> {
    static S: OnceLock<Option<Value>> = OnceLock::new();
    S.get_or_init(|| serde_json::from_str(&schema::text()).ok())
        .as_ref()
}

/// Each schema error as a configuration error, with the member to take out
/// before parsing the rest (as segments from the root), if any.
fn schema_errors(value: &Value) -> Vec<(ConfigError, Option<Vec<String>>)> {
    let (Some(v), Some(root)) = (validator(), root_schema()) else {
        return Vec::new();
    };
    let mut out: Vec<(ConfigError, Option<Vec<String>>)> = Vec::new();
    for e in v.iter_errors(value) {
        say(&e, value, root, &mut out);
    }
    out
}

/// Of an `anyOf` an optional member fails (`[definition, null]`), the
/// alternative it was meant as: the one that failed for more than not
/// being null. Its errors say what is wrong inside (a missing `domain`).
fn meant<'e>(
    e: &ValidationError<'_>,
    alternatives: &'e [Vec<ValidationError<'static>>],
) -> Option<&'e [ValidationError<'static>]> {
    let mut tried = alternatives.iter().filter(|errors| {
        !matches!(errors.as_slice(), [one] if matches!(one.kind(), ValidationErrorKind::Type { .. })
            && one.instance_path() == e.instance_path())
    });
    match (tried.next(), tried.next()) {
        (Some(one), None) => Some(one.as_slice()),
        _ => None,
    }
}

/// One schema error as configuration errors, in `out`.
fn say(
    e: &ValidationError<'_>,
    value: &Value,
    root: &Value,
    out: &mut Vec<(ConfigError, Option<Vec<String>>)>,
) {
    {
        let segments: Vec<String> = e
            .instance_path()
            .segments()
            .map(|s| match s {
                LocationSegment::Property(p) => p.into_owned(),
                LocationSegment::Index(i) => i.to_string(),
            })
            .collect();
        let path = json_path(value, &segments);
        let field = field_name(value, &segments);
        let sub = subschema(root, value, &segments);
        let instance = e.instance().as_ref().clone();
        let (kind, message, remove) = match e.kind() {
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                let known = sub
                    .and_then(|s| s.get("properties"))
                    .and_then(Value::as_object)
                    .map(|p| {
                        p.keys()
                            .filter(|k| *k != "$schema")
                            .map(|k| format!("`{k}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default();
                for u in unexpected {
                    let mut seg = segments.clone();
                    seg.push(u.clone());
                    out.push((
                        config_error(
                            &format!("{path}.{u}"),
                            ErrorKind::UnknownField,
                            format!("unknown field `{u}`, expected one of {known}"),
                        ),
                        Some(seg),
                    ));
                }
                return;
            }
            ValidationErrorKind::Required { property } => (
                ErrorKind::MissingField,
                format!(
                    "missing field `{}`{}",
                    property.as_str().unwrap_or_default(),
                    sub.and_then(|s| s.get("properties"))
                        .and_then(|p| p.get(property.as_str().unwrap_or_default()))
                        .and_then(|p| p.get("description"))
                        .and_then(Value::as_str)
                        .map(|d| format!(" ({})", first_sentence(d)))
                        .unwrap_or_default()
                ),
                None,
            ),
            ValidationErrorKind::Type { kind } => (
                ErrorKind::WrongType,
                format!(
                    "{field} must be {}, not {}",
                    expected_words(kind, sub),
                    kind_of(&instance)
                ),
                Some(segments.clone()),
            ),
            ValidationErrorKind::Minimum { .. } | ValidationErrorKind::Maximum { .. } => (
                ErrorKind::Invalid,
                format!(
                    "{field} is {instance}: it must be {}",
                    range_words(sub).unwrap_or_else(|| e.to_string())
                ),
                Some(segments.clone()),
            ),
            ValidationErrorKind::Enum { options } => (
                ErrorKind::WrongType,
                format!(
                    "{field} is {instance}: it must be one of {}",
                    list(options.as_array().map(Vec::as_slice).unwrap_or_default())
                ),
                Some(segments.clone()),
            ),
            ValidationErrorKind::AnyOf { context }
                if !instance.is_null() && meant(e, context).is_some() =>
            {
                for i in meant(e, context).unwrap_or_default() {
                    say(i, value, root, out);
                }
                return;
            }
            ValidationErrorKind::OneOfNotValid { .. } | ValidationErrorKind::AnyOf { .. } => {
                let consts = sub.map(consts_of).unwrap_or_default();
                // A word none of the allowed ones is a wrong shape; a value
                // no alternative takes, without words to list, is invalid.
                let (kind, message) = if consts.is_empty() {
                    (
                        ErrorKind::Invalid,
                        format!("{field} is {instance}: not a valid {field}"),
                    )
                } else {
                    (
                        ErrorKind::WrongType,
                        format!("{field} is {instance}: it must be one of {}", list(&consts)),
                    )
                };
                (kind, message, Some(segments.clone()))
            }
            ValidationErrorKind::MinLength { limit } => (
                ErrorKind::Invalid,
                format!("{field} must be at least {limit} characters long"),
                Some(segments.clone()),
            ),
            ValidationErrorKind::MaxLength { limit } => (
                ErrorKind::Invalid,
                format!("{field} must be at most {limit} characters long"),
                Some(segments.clone()),
            ),
            ValidationErrorKind::Pattern { .. } => (
                ErrorKind::Invalid,
                format!(
                    "{field} {instance} is not valid{}",
                    sub.and_then(|s| s.get("description"))
                        .and_then(Value::as_str)
                        .map(|d| format!(": {}", first_sentence(d)))
                        .unwrap_or_default()
                ),
                Some(segments.clone()),
            ),
            _ => (ErrorKind::Invalid, e.to_string(), Some(segments.clone())),
        };
        // Only object members are taken out: removing a list item would
        // move the paths of the items after it.
        let remove = remove.filter(|seg| is_member(value, seg));
        out.push((config_error(&path, kind, message), remove));
    }
}

fn config_error(path: &str, kind: ErrorKind, message: String) -> ConfigError {
    ConfigError {
        path: path.to_string(),
        kind,
        message,
    }
}

fn first_sentence(d: &str) -> String {
    let d = d.replace('\n', " ");
    match d.find(". ") {
        Some(i) => d[..i].to_string(),
        None => d.trim_end_matches('.').to_string(),
    }
}

fn list(values: &[Value]) -> String {
    values
        .iter()
        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `const`s of a `oneOf` of constants (an enum with documented values).
fn consts_of(s: &Value) -> Vec<Value> {
    ["oneOf", "anyOf"]
        .iter()
        .filter_map(|k| s.get(*k).and_then(Value::as_array))
        .flatten()
        .filter_map(|o| o.get("const").cloned())
        .collect()
}

fn kind_of(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("{b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the text {s:?}"),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
}

fn type_words(t: &str) -> &'static str {
    match t {
        "integer" => "a whole number",
        "number" => "a number",
        "string" => "text (in quotes)",
        "boolean" => "true or false",
        "array" => "a list",
        "object" => "an object",
        "null" => "left out",
        _ => "something else",
    }
}

fn expected_words(kind: &TypeKind, sub: Option<&Value>) -> String {
    if let Some(r) = range_words(sub) {
        return r;
    }
    let types: Vec<String> = match kind {
        TypeKind::Single(t) => vec![t.to_string()],
        TypeKind::Multiple(ts) => ts.iter().map(|t| t.to_string()).collect(),
    };
    let words: Vec<&str> = types
        .iter()
        .filter(|t| *t != "null")
        .map(|t| type_words(t))
        .collect();
    if words.is_empty() {
        "left out".into()
    } else {
        words.join(" or ")
    }
}

/// `a whole number from 1 to 4,294,967,295`, from the schema's bounds.
fn range_words(sub: Option<&Value>) -> Option<String> {
    let s = sub?;
    let integer = s.get("type").is_some_and(|t| {
        t == "integer"
            || t.as_array()
                .is_some_and(|a| a.iter().any(|x| x == "integer"))
    });
    let num = |k: &str| s.get(k).and_then(Value::as_u64).map(words::number);
    let what = if integer {
        "a whole number"
    } else {
        "a number"
    };
    match (num("minimum"), num("maximum")) {
        (Some(lo), Some(hi)) => Some(format!("{what} from {lo} to {hi}")),
        (Some(lo), None) => Some(format!("{what} of at least {lo}")),
        (None, Some(hi)) => Some(format!("{what} of at most {hi}")),
        (None, None) => None,
    }
}

/// `$.routes[0].bounds[1].limit` from the pointer's segments.
fn json_path(value: &Value, segments: &[String]) -> String {
    let mut path = String::from("$");
    let mut at = Some(value);
    for s in segments {
        match at {
            Some(Value::Array(items)) => {
                path.push_str(&format!("[{s}]"));
                at = s.parse::<usize>().ok().and_then(|i| items.get(i));
            }
            _ => {
                path.push('.');
                path.push_str(s);
                at = at.and_then(|v| v.get(s));
            }
        }
    }
    path
}

/// The name of the member at the end of the path (`limit`), or of the list
/// holding it (`methods`), or `the configuration`.
fn field_name(value: &Value, segments: &[String]) -> String {
    let mut name = "the configuration".to_string();
    let mut at = Some(value);
    for s in segments {
        match at {
            Some(Value::Array(items)) => {
                name = format!("{name}[{s}]");
                at = s.parse::<usize>().ok().and_then(|i| items.get(i));
            }
            _ => {
                name = s.clone();
                at = at.and_then(|v| v.get(s));
            }
        }
    }
    name
}

fn is_member(value: &Value, segments: &[String]) -> bool {
    let Some((last, parent)) = segments.split_last() else {
        return false;
    };
    let mut at = Some(value);
    for s in parent {
        at = at.and_then(|v| step(v, s));
    }
    at.and_then(Value::as_object)
        .is_some_and(|o| o.contains_key(last))
}

/// One segment of a JSON path down from `v`: an array index or a member.
fn step<'a>(v: &'a Value, s: &str) -> Option<&'a Value> {
    match v {
        Value::Array(items) => s.parse::<usize>().ok().and_then(|i| items.get(i)),
        v => v.get(s),
    }
}

/// The value at `parent` (the segments above a member), for changing it.
fn parent_mut<'a>(value: &'a mut Value, parent: &[String]) -> Option<&'a mut Value> {
    let mut at = Some(value);
    for s in parent {
        at = match at {
            Some(Value::Array(items)) => s.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
            Some(x) => x.get_mut(s),
            None => None,
        };
    }
    at
}

fn remove_member(value: &mut Value, segments: &[String]) -> bool {
    let Some((last, parent)) = segments.split_last() else {
        return false;
    };
    match parent_mut(value, parent) {
        Some(Value::Object(o)) => o.shift_remove(last).is_some(),
        _ => false,
    }
}

/// The schema that applies at the instance path: properties, items and
/// `$ref`s followed; of an `anyOf`/`oneOf` of a `$ref` and null (an
/// optional member), the `$ref`.
fn subschema<'a>(root: &'a Value, value: &Value, segments: &[String]) -> Option<&'a Value> {
    let mut s = resolve(root, root)?;
    let mut at = Some(value);
    for seg in segments {
        s = match at {
            Some(Value::Array(items)) => {
                at = seg.parse::<usize>().ok().and_then(|i| items.get(i));
                resolve(root, s.get("items")?)?
            }
            _ => {
                at = at.and_then(|v| v.get(seg));
                resolve(root, s.get("properties")?.get(seg)?)?
            }
        };
    }
    Some(s)
}

fn resolve<'a>(root: &'a Value, s: &'a Value) -> Option<&'a Value> {
    let mut s = s;
    for _ in 0..8 {
        if let Some(r) = s.get("$ref").and_then(Value::as_str) {
            let name = r.strip_prefix("#/$defs/")?;
            s = root.get("$defs")?.get(name)?;
            continue;
        }
        // An optional member: `anyOf: [{$ref}, {type: null}]`.
        if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
            let not_null: Vec<&Value> = any
                .iter()
                .filter(|o| o.get("type") != Some(&Value::from("null")))
                .collect();
            if let [one] = not_null[..] {
                if one.get("const").is_none() {
                    s = one;
                    continue;
                }
            }
        }
        return Some(s);
    }
    Some(s)
}

/// `"… at line 3 column 7"` → `"…"`.
pub fn without_json_location(message: &str) -> &str {
    if let Some(at) = message.rfind(" at line ") {
        let rest = &message[at + " at line ".len()..];
        let mut words = rest.split(' ');
        let is_location = matches!(
            (words.next(), words.next(), words.next(), words.next()),
            (Some(l), Some("column"), Some(c), None)
                if l.bytes().all(|b| b.is_ascii_digit()) && c.bytes().all(|b| b.is_ascii_digit())
        );
        if is_location {
            return &message[..at];
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(json: &str) -> Vec<String> {
        parse(json.as_bytes())
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn every_structural_problem_is_reported_at_once() {
        let e = errors(
            r#"{"routes":[{"name":"a","bounds":[
                {"per":"ip","limit":5,"window":"PT1M"},
                {"per":"address","limit":"5","window":"PT1M","burst":2},
                {"per":"address","limit":0,"window":"PT1M"}]}],
              "shadow":"yes"}"#,
        );
        let want = [
            "$.routes[0].bounds[0].per: per is \"ip\": it must be one of route, address, user, token, org, account",
            "$.routes[0].bounds[1].limit: limit must be a whole number from 1 to 4,294,967,295, not the text \"5\"",
            "$.routes[0].bounds[1].burst: unknown field `burst`, expected one of",
            "$.routes[0].bounds[2].limit: 0 is out of range: a limit is a whole number from 1 to",
            "$.shadow: shadow must be true or false, not the text \"yes\"",
        ];
        for w in want {
            assert!(
                e.iter().any(|e| e.starts_with(w)),
                "missing {w:?} in {e:#?}"
            );
        }
        assert_eq!(e.len(), want.len(), "{e:#?}");
        assert!(
            !e.iter().any(|e| e.contains("u64") || e.contains("u32")),
            "{e:#?}"
        );
    }

    #[test]
    fn the_parsers_own_checks_come_after_the_structural_ones() {
        // The window and the duplicate name are the parser's checks, found
        // once the bad `per` is taken out.
        let e = errors(
            r#"{"routes":[{"name":"a","bounds":[{"per":"ip","limit":5,"window":"PT1M"},
                {"per":"address","limit":5,"window":"P2D"}]},
              {"name":"a"}]}"#,
        );
        assert!(
            e.iter()
                .any(|e| e.starts_with("$.routes[0].bounds[0].per:")),
            "{e:#?}"
        );
        assert!(
            e.iter()
                .any(|e| e.starts_with("$.routes[0].bounds[1].window:")),
            "{e:#?}"
        );
        assert!(e.iter().any(|e| e.contains("$.routes[1].name")), "{e:#?}");
    }

    #[test]
    fn a_valid_configuration_and_the_parsers_errors_are_as_before() {
        assert!(parse(br#"{"routes":[]}"#).is_ok());
        let e = errors(
            r#"{"routes":[{"name":"a","bounds":[{"per":"address","limit":5,"window":"P2D"}]}]}"#,
        );
        assert_eq!(e.len(), 1, "{e:#?}");
        assert!(
            e[0].starts_with("$.routes[0].bounds[0].window: \"P2D\" is outside"),
            "{e:#?}"
        );
    }
}

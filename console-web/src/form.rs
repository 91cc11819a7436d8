//! The fields of a part of the configuration as the page shows them, read
//! from the configuration's JSON Schema (the serde types and their doc
//! comments): each field's name, kind, default, choices and description.
//! The page draws the identity sources, the rate-limit service and a
//! route's match from these, so their fields and words are the core's.

use ratebound::reading::schema;
use serde_json::{json, Map, Value};
use std::sync::OnceLock;

fn root() -> Option<&'static Value> {
    static S: OnceLock<Option<Value>> = OnceLock::new();
    S.get_or_init(|| serde_json::from_str(&schema::text()).ok())
        .as_ref()
}

fn definition(name: &str) -> Option<&'static Value> {
    root()?.get("$defs")?.get(name)
}

/// The definition a property refers to, directly or as `anyOf [ref, null]`.
fn referred(property: &Value) -> Option<&str> {
    let r = property.get("$ref").or_else(|| {
        property
            .get("anyOf")?
            .as_array()?
            .iter()
            .find_map(|v| v.get("$ref"))
    })?;
    r.as_str()?.strip_prefix("#/$defs/")
}

fn text(v: Option<&Value>) -> Value {
    v.and_then(Value::as_str)
        .map_or(Value::Null, |s| Value::String(s.replace('\n', " ")))
}

/// One property: `{name, kind, description, default, required, options,
/// object}`. Kinds: `text`, `number`, `flag`, `list` (of strings),
/// `choice` (one of `options`), `object` (the definition `object`).
fn field(name: &str, property: &Value, required: bool) -> Value {
    let def = referred(property).and_then(|d| Some((d, definition(d)?)));
    let types: Vec<&str> = match property.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let mut options = Vec::new();
    let kind = match def {
        Some((_, d)) if d.get("oneOf").is_some() => {
            for o in d
                .get("oneOf")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                options.push(
                    json!({"value": o.get("const"), "description": text(o.get("description"))}),
                );
            }
            "choice"
        }
        Some(_) => "object",
        None if types.contains(&"boolean") => "flag",
        None if types.contains(&"integer") => "number",
        None if types.contains(&"array") => "list",
        None => "text",
    };
    let description = match property.get("description") {
        Some(d) => text(Some(d)),
        None => text(def.and_then(|(_, d)| d.get("description"))),
    };
    json!({
        "name": name,
        "kind": kind,
        "description": description,
        "default": property.get("default"),
        "required": required,
        "options": options,
        "object": if kind == "object" { def.map(|(n, _)| n) } else { None },
    })
}

/// The fields of definition `name` (e.g. `JwtSource`), in the order the
/// configuration writes them, and its description: `{description, fields}`.
pub fn form(name: &str) -> Value {
    let Some(d) = definition(name) else {
        return json!({"description": null, "fields": []});
    };
    let required: Vec<&str> = d
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let empty = Map::new();
    let fields: Vec<Value> = d
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty)
        .iter()
        .map(|(k, p)| field(k, p, required.contains(&k.as_str())))
        .collect();
    json!({"description": text(d.get("description")), "fields": fields})
}

#[cfg(test)]
mod tests {
    use super::form;

    #[test]
    fn the_service_reads_from_the_schema() {
        let f = form("RateLimitServiceConfig");
        let fields = f["fields"].as_array().cloned().unwrap_or_default();
        let names: Vec<&str> = fields.iter().filter_map(|x| x["name"].as_str()).collect();
        assert_eq!(
            names,
            [
                "cluster",
                "domain",
                "timeout_ms",
                "on_error",
                "sync_ms",
                "fleet_nodes",
                "key_secret"
            ]
        );
        assert_eq!(fields[0]["required"], true);
        assert_eq!(fields[2]["kind"], "number");
        assert_eq!(fields[2]["default"], 100);
        assert_eq!(fields[3]["kind"], "choice");
        assert_eq!(fields[3]["options"][1]["value"], "allow");
        assert_eq!(fields[6]["kind"], "object");
        assert_eq!(fields[6]["object"], "KeySecretConfig");
        let m = form("MatchConfig");
        assert_eq!(m["fields"][3]["kind"], "list");
        assert_eq!(form("MtlsSource")["fields"][0]["kind"], "flag");
        assert_eq!(form("nothing")["fields"], serde_json::json!([]));
    }
}

//! The JSON Schema of the configuration, generated from the serde types in
//! [`crate::config`]. `filter-config/ratebound.schema.json` is this text; a
//! test keeps the two equal.

use crate::config::WrittenConfig;

/// The schema's `$id`: names this schema, version by version of the
/// configuration format (a name, not a download address).
pub(crate) const ID: &str = "urn:ratebound:filter-config:v1";

/// The schema as pretty JSON with a final newline, as committed.
pub fn text() -> String {
    let mut schema = schemars::schema_for!(WrittenConfig);
    // The schema names itself (editors and validators key on it); `$id`
    // goes right after `$schema`.
    if let Some(map) = schema.as_object_mut() {
        let rest: Vec<_> = std::mem::take(map).into_iter().collect();
        for (k, v) in rest {
            let is_schema = k == "$schema";
            map.insert(k, v);
            if is_schema {
                map.insert("$id".into(), serde_json::Value::String(ID.into()));
            }
        }
    }
    let mut s = serde_json::to_string_pretty(&schema).unwrap_or_default();
    s.push('\n');
    s
}

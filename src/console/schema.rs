//! The JSON Schema of the configuration, generated from the serde types in
//! [`crate::config`]. `filter-config/ratebound.schema.json` is this text; a
//! test keeps the two equal.

use crate::config::Config;

/// The schema as pretty JSON with a final newline, as committed.
pub fn text() -> String {
    let schema = schemars::schema_for!(Config);
    let mut s = serde_json::to_string_pretty(&schema).unwrap_or_default();
    s.push('\n');
    s
}

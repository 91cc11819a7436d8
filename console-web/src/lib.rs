//! The ratebound core in the browser: what `ratebound console`'s page shows
//! where a number is typed. One call, [`read`], takes the configuration the
//! page holds (JSON text) and the number of nodes, and returns everything
//! the page puts beside the fields: `check`'s errors at their JSON paths
//! (the same words: [`ratebound::reading::structure`]), `explain`'s rows
//! with their readings and warnings ([`ratebound::reading::explain`]), and
//! the shared-data keys the configuration and each route's operations
//! cost against the budget the filter enforces
//! ([`ratebound::count::budget`]). The page's JavaScript only places these
//! strings; no rule is written there.

use ratebound::config::plan::Plan;
use ratebound::config::{bound_kinds, ConfigError, ErrorKind, Per, Scope};
use ratebound::count::budget::{keys_of, CONFIG_KEYS, TABLE_KEYS};
use ratebound::reading::explain::explain;
use ratebound::reading::{audience, structure, words};
use serde_json::{json, Value};
use wasm_bindgen::prelude::wasm_bindgen;

mod form;

/// The fields of the configuration's definition `name` (`JwtSource`,
/// `RateLimitServiceConfig`, `MatchConfig`…) as the page draws them, from
/// the JSON Schema: `{description, fields: [{name, kind, default, …}]}`.
#[wasm_bindgen]
pub fn fields(name: &str) -> String {
    form::form(name).to_string()
}

/// The page's reading of `text` on `nodes` nodes (0: not said), as JSON.
#[wasm_bindgen]
pub fn read(text: &str, nodes: u32) -> String {
    reading(text, (nodes > 0).then_some(nodes)).to_string()
}

/// A bound's `applies_to` (JSON) as its field shows it: "partner and
/// trial", "org:acme", "signed in"; empty for everybody.
#[wasm_bindgen]
pub fn applies_text(applies_to: &str) -> String {
    serde_json::from_str(applies_to)
        .map(|a| audience::write(&a))
        .unwrap_or_default()
}

/// What the "applies to" field may go on with, as a JSON list of the
/// field's whole text: the word being typed completed from the roles and
/// organisations `config` (JSON) names, or the field's own words.
#[wasm_bindgen]
pub fn applies_suggestions(config: &str, text: &str) -> String {
    let config = serde_json::from_str(config).unwrap_or(Value::Null);
    json!(audience::suggest(text, &audience::known(&config))).to_string()
}

/// The version of the core, so the page can say which build it runs.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// [`read`] as a value: `{valid, nodes, errors, explanation, budget, costs,
/// needs_service}`.
pub fn reading(text: &str, nodes: Option<u32>) -> Value {
    let mut r = checked(text, nodes);
    if let Some(m) = r.as_object_mut() {
        m.insert("needs_service".into(), needs_service(text).into());
    }
    r
}

/// Whether a bound, valid or not yet, is counted by the rate-limit service
/// (an installation or fleet bound): the page then shows the service.
fn needs_service(text: &str) -> bool {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    let routes = v.get("routes").and_then(Value::as_array);
    let bounds = routes.into_iter().flatten().flat_map(|r| {
        let own = r
            .get("bounds")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        let ops = r
            .get("operations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .flat_map(|o| {
                o.get("bounds")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
            });
        own.chain(ops)
    });
    bounds
        .filter_map(|b| b.get("scope").cloned())
        .filter_map(|s| serde_json::from_value::<Scope>(s).ok())
        .any(|s| s != Scope::Node)
}

/// Where the page shows an error: a missing field at the field itself
/// (`check` says it at the object that lacks it).
fn at_field(e: &ConfigError) -> String {
    let missing = (e.kind == ErrorKind::MissingField)
        .then(|| e.message.strip_prefix("missing field `")?.split('`').next())
        .flatten();
    match missing {
        Some(field) => format!("{}.{field}", e.path),
        None => e.path.clone(),
    }
}

fn checked(text: &str, nodes: Option<u32>) -> Value {
    // "applies to" as typed ("partner and trial") is read into its JSON
    // first; what does not read is said at the field, in the page's words.
    let (text, mut word_errors) = match serde_json::from_str::<Value>(text) {
        Ok(mut v) if text.contains("applies_to") => {
            let errors = audience::normalize(&mut v);
            (std::borrow::Cow::Owned(v.to_string()), errors)
        }
        _ => (std::borrow::Cow::Borrowed(text), Vec::new()),
    };
    let parsed = match structure::parse(text.as_bytes()) {
        Ok(_) if !word_errors.is_empty() => Err(std::mem::take(&mut word_errors)),
        Ok(config) => Ok(config),
        Err(mut errors) => {
            errors.append(&mut word_errors);
            Err(errors)
        }
    };
    match parsed {
        Err(errors) => json!({
            "valid": false,
            "nodes": nodes,
            "errors": errors
                .iter()
                .map(|e| json!({"path": e.path, "at": at_field(e), "message": e.message, "text": e.to_string()}))
                .collect::<Vec<_>>(),
        }),
        Ok(config) => {
            let plan = Plan::compile(&config);
            let (tables, singles) = bound_kinds(&config);
            let keys = keys_of(tables, singles);
            json!({
                "valid": true,
                "nodes": nodes,
                "errors": [],
                "explanation": explain(&plan, nodes),
                "budget": {
                    "keys": keys,
                    "max": CONFIG_KEYS,
                    "keyed_bounds": tables,
                    "route_bounds": singles,
                    "keys_per_keyed_bound": TABLE_KEYS,
                    "words": format!(
                        "{} of the {} shared-data keys one configuration may use",
                        words::number(keys),
                        words::number(CONFIG_KEYS)
                    ),
                },
                "costs": config.routes.iter().map(operations_cost).collect::<Vec<_>>(),
            })
        }
    }
}

/// What a route's chosen operations cost in shared-data keys: each keyed
/// bound a table of [`TABLE_KEYS`] keys, each `per: route` bound one key,
/// counted as the filter's budget counts them (installation bounds live in
/// the rate-limit service, not in shared data).
fn operations_cost(route: &ratebound::config::RouteConfig) -> Value {
    let bounds = route
        .operations
        .iter()
        .flat_map(|o| &o.bounds)
        .filter(|b| b.scope.in_shared_data());
    let singles = bounds.clone().filter(|b| b.per == Per::Route).count();
    let keyed = bounds.count() - singles;
    let keys = keys_of(keyed, singles);
    let ops = route.operations.len();
    let mut parts = Vec::new();
    if keyed > 0 {
        parts.push(format!(
            "{} keyed per caller × {} keys",
            plural(keyed, "bound"),
            words::number(TABLE_KEYS)
        ));
    }
    if singles > 0 {
        parts.push(format!(
            "{} per operation × 1 key",
            plural(singles, "bound")
        ));
    }
    let words = if ops == 0 {
        "no operation chosen: no counters of their own".to_string()
    } else {
        format!(
            "{} chosen: {} = {} of the {} shared-data keys one configuration may use",
            plural(ops, "operation"),
            if parts.is_empty() {
                "no bounds".to_string()
            } else {
                parts.join(" + ")
            },
            words::number(keys),
            words::number(CONFIG_KEYS)
        )
    };
    json!({
        "route": route.name,
        "operations": ops,
        "keyed_bounds": keyed,
        "route_bounds": singles,
        "keys": keys,
        "max": CONFIG_KEYS,
        "words": words,
    })
}

fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{} {one}s", words::number(n as u64))
    }
}

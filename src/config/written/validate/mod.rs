//! [`parse`]: the configuration text to a [`Config`] (what was written, with
//! the typed values its checks read), or every problem found, each with its
//! JSON path, its kind and what would be valid.
//!
//! By concern: [`routes`] (matches, operations, bounds), [`identity`],
//! [`service`] (installation and fleet bounds, the rate-limit service),
//! [`cost`]; the whole configuration's checks (names, the key budget) here.

mod cost;
mod identity;
mod routes;
mod service;
#[cfg(test)]
mod tests;

use super::error::{err, text_err, ConfigError, ErrorKind};
use super::names::{is_header_name, valid_name};
use super::*;
use identity::{validate_account, validate_identity};
use routes::{validate_bounds, validate_enforcement, validate_match, validate_operations};
use service::validate_service;

/// Parses and validates a JSON configuration. Returns every error found;
/// without one, the typed values `Plan::compile` reads.
pub fn parse(bytes: &[u8]) -> Result<Config, Vec<ConfigError>> {
    if bytes.len() > MAX_CONFIG_BYTES {
        return Err(vec![text_err(format!(
            "configuration is {} bytes; at most {MAX_CONFIG_BYTES} are accepted",
            bytes.len()
        ))]);
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        vec![text_err(format!(
            "configuration is not UTF-8 (byte {})",
            e.valid_up_to()
        ))]
    })?;
    let text = if text.trim().is_empty() { "{}" } else { text };
    let mut de = serde_json::Deserializer::from_str(text);
    let config: WrittenConfig = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = json_path(&e.path().to_string());
        // serde_json's message ends with "at line L column C": kept, it helps in big files.
        vec![ConfigError {
            path,
            kind: ErrorKind::of_serde(e.inner()),
            message: e.inner().to_string(),
        }]
    })?;
    de.end()
        .map_err(|e| vec![text_err(format!("trailing characters: {e}"))])?;
    let (errors, checked) = validate(&config);
    match checked {
        Some(checked) if errors.is_empty() => Ok(Config::new(config, checked)),
        _ => Err(errors),
    }
}

fn json_path(serde_path: &str) -> String {
    if serde_path == "." || serde_path.is_empty() {
        "$".to_string()
    } else if serde_path.starts_with('[') {
        format!("${serde_path}")
    } else {
        format!("$.{serde_path}")
    }
}

/// Every problem of `c`, and its typed values when it has none.
fn validate(c: &WrittenConfig) -> (Vec<ConfigError>, Option<Checked>) {
    let mut errors = Vec::new();
    if !valid_name(&c.instance) {
        errors.push(err(
            "$.instance",
            "must be 1-64 characters of A-Z a-z 0-9 _ - (it prefixes shared-data keys and stats)",
        ));
    }
    let a = &c.client_address;
    let ipv4_prefix = u8::try_from(a.ipv4_prefix)
        .ok()
        .filter(|p| (1..=32).contains(p));
    let ipv6_prefix = u8::try_from(a.ipv6_prefix)
        .ok()
        .filter(|p| (1..=128).contains(p));
    if ipv4_prefix.is_none() {
        errors.push(err(
            "$.client_address.ipv4_prefix",
            format!(
                "{} is out of range: give 1 to 32 leading bits (32 counts each IPv4 address)",
                a.ipv4_prefix
            ),
        ));
    }
    if ipv6_prefix.is_none() {
        errors.push(err(
            "$.client_address.ipv6_prefix",
            format!("{} is out of range: give 1 to 128 leading bits (64, the default, counts each /64 network; 128 each address)", a.ipv6_prefix),
        ));
    }
    if let Some(id) = &c.identity {
        validate_identity(id, &mut errors);
    }
    validate_enforcement(c.enforce_percent, c.shadow, "$", &mut errors);
    if let Some(h) = c
        .would_refuse_header
        .as_deref()
        .filter(|h| !is_header_name(h))
    {
        errors.push(err(
            "$.would_refuse_header",
            format!(
                "{h:?} is not a lowercase request header name; e.g. \"x-ratebound-would-refuse\""
            ),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    let mut routes = Some(Vec::with_capacity(c.routes.len()));
    for (i, r) in c.routes.iter().enumerate() {
        let at = format!("$.routes[{i}]");
        if !valid_name(&r.name) {
            errors.push(err(
                format!("{at}.name"),
                "must be 1-64 characters of A-Z a-z 0-9 _ - (it names stats)",
            ));
        } else if !seen.insert(r.name.as_str()) {
            errors.push(err(
                format!("{at}.name"),
                format!(
                    "duplicate route name {:?}; route names must be unique",
                    r.name
                ),
            ));
        }
        validate_match(&r.matching, &format!("{at}.match"), &mut errors);
        if let Some(a) = &r.account {
            validate_account(a, &format!("{at}.account"), &mut errors);
        }
        let bounds = validate_bounds(c, r, &r.bounds, &format!("{at}.bounds"), &mut errors);
        let operations = validate_operations(c, r, &at, &mut errors);
        let route = bounds
            .zip(operations)
            .map(|(bounds, operations)| CheckedRoute { bounds, operations });
        routes = routes.zip(route).map(|(mut all, r)| {
            all.push(r);
            all
        });
    }
    validate_service(c, &mut errors);
    validate_budget(c, &mut errors);
    let checked = (|| {
        Some(Checked {
            ipv4_prefix: ipv4_prefix?,
            ipv6_prefix: ipv6_prefix?,
            routes: routes?,
        })
    })();
    (errors, checked)
}

/// Node and fleet bounds of every route and operation: (keyed per caller,
/// per route). Installation bounds keep nothing in shared data.
pub fn bound_kinds(c: &WrittenConfig) -> (usize, usize) {
    let bounds = c.routes.iter().flat_map(|r| {
        r.bounds
            .iter()
            .chain(r.operations.iter().flat_map(|o| &o.bounds))
            .filter(|b| b.scope.in_shared_data())
    });
    let singles = bounds.clone().filter(|b| b.per == Per::Route).count();
    (bounds.count() - singles, singles)
}

/// The configuration fits the shared-data budget (`crate::count::budget`).
fn validate_budget(c: &WrittenConfig, errors: &mut Vec<ConfigError>) {
    use crate::count::budget::{keys_of, CONFIG_BOUNDS, CONFIG_KEYS, TABLE_KEYS};
    let (tables, singles) = bound_kinds(c);
    if tables + singles > CONFIG_BOUNDS {
        errors.push(err(
            "$.routes",
            format!(
                "{} bounds (operations' included); at most {CONFIG_BOUNDS} fit in one \
                 configuration: split the routes across instances or remove bounds",
                tables + singles
            ),
        ));
    }
    let keys = keys_of(tables, singles);
    if keys > CONFIG_KEYS {
        errors.push(err(
            "$.routes",
            format!(
                "{tables} bounds keyed per caller need {keys} shared-data keys \
                 ({TABLE_KEYS} each, to track up to {} callers); the budget is \
                 {CONFIG_KEYS} keys a configuration ({} keyed bounds): key some \
                 bounds per route, or remove some",
                number(u64::from(crate::count::lane::Table::DEFAULT.cap)),
                CONFIG_KEYS / TABLE_KEYS
            ),
        ));
    }
}

/// An operation's stat name: its own, its operationId, or its position.
pub(crate) fn operation_name(o: &OperationConfig, index: usize) -> String {
    o.name
        .clone()
        .or_else(|| o.operation_id.clone())
        .unwrap_or_else(|| format!("op{index}"))
}

/// A configured host or authority that can never be an `:authority`.
fn authority_error(v: &str, path: String, any_port: &str) -> Option<ConfigError> {
    use crate::config::normalize::{check_authority, AuthorityError};
    let message = match check_authority(v).err()? {
        AuthorityError::Name => format!(
            "{v:?} is not a host name (letters, digits, '-', '.', or an IPv6 address in brackets) with at most a \":port\"; write e.g. \"api.example.com\" or \"api.example.com:8443\""
        ),
        AuthorityError::Port(p) => {
            let name = v.strip_suffix(p.as_str()).unwrap_or(v).trim_end_matches(':');
            format!(
                "{v:?} has port {p:?}, not a port number from 1 to 65535; write e.g. \"{name}:8443\", or \"{name}\" {any_port}"
            )
        }
    };
    Some(err(path, message))
}

/// A bound's name: its own, or its position (`b0`, `b1`, …).
pub fn bound_name(b: &BoundConfig, index: usize) -> String {
    b.name.clone().unwrap_or_else(|| format!("b{index}"))
}

//! The configuration as users write it (Envoy `configuration`, Istio
//! `pluginConfig`): serde types, then a validation pass that reports every
//! problem with its JSON path and what would be valid. The filter and the CLI
//! both go through [`parse`]; nothing else reads configuration text.

use serde::Deserialize;
use std::fmt;

/// What `valid_name` accepts, for the JSON Schema.
#[cfg(not(target_arch = "wasm32"))]
const NAME_PATTERN: &str = "^[A-Za-z0-9_-]{1,64}$";
/// A superset of what [`window_ms`] parses, for the JSON Schema: `P`, then
/// weeks alone, or days and a `T` part with hours, minutes, seconds (the
/// parser also takes signs, exponents and decimal commas). Years and months
/// are refused by both. The range (one second to one day) is checked by the
/// parser only.
#[cfg(not(target_arch = "wasm32"))]
const WINDOW_PATTERN: &str = r"^P(?:N+W|(?:N+D)?(?:T(?:N+H)?(?:N+M)?(?:N+S)?)?)$";
/// One number of a window, as the pattern above spells it.
#[cfg(not(target_arch = "wasm32"))]
const WINDOW_NUMBER: &str = "[-+0-9.,eE]";

/// Largest accepted configuration, so a hostile file cannot make us allocate
/// without bound before we even look at it.
pub const MAX_CONFIG_BYTES: usize = 1 << 20;
/// serde_json refuses nesting deeper than 128 itself; our schema is 5 deep.
const MIN_WINDOW_MS: u64 = 1_000;
const MAX_WINDOW_MS: u64 = 86_400_000;

/// The configuration of a ratebound filter (Envoy `configuration`, Istio
/// `pluginConfig`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[cfg_attr(not(target_arch = "wasm32"), derive(schemars::JsonSchema))]
#[cfg_attr(
    not(target_arch = "wasm32"),
    schemars(title = "ratebound filter configuration")
)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Prefix of every shared-data key. Two filter configurations that share
    /// an Envoy `vm_id` must use different instances.
    #[serde(default = "default_instance")]
    #[cfg_attr(not(target_arch = "wasm32"), schemars(pattern(NAME_PATTERN)))]
    pub instance: String,
    /// Send RateLimit-* headers on admitted responses (most constrained bound).
    #[serde(default = "default_true")]
    pub success_headers: bool,
    /// Routes in order: a request is counted by the first route that matches
    /// it, and by every bound of that route.
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
}

/// A set of requests (its `match`) and the bounds they are counted against.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[cfg_attr(not(target_arch = "wasm32"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Unique among routes; names the route's stats.
    #[cfg_attr(not(target_arch = "wasm32"), schemars(pattern(NAME_PATTERN)))]
    pub name: String,
    /// Which requests the route takes; every condition given must hold, and
    /// an empty match takes every request.
    #[serde(default, rename = "match")]
    pub matching: MatchConfig,
    /// Every bound applies: the first one exceeded refuses.
    #[serde(default)]
    pub bounds: Vec<BoundConfig>,
}

/// Conditions on a request; omitted ones accept anything.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[cfg_attr(not(target_arch = "wasm32"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct MatchConfig {
    /// Envoy's route `name` (the `xds.route_name` property).
    #[cfg_attr(not(target_arch = "wasm32"), schemars(length(min = 1)))]
    pub route_name: Option<String>,
    /// Exact `:authority`, case-insensitive; without a port it matches any port.
    #[cfg_attr(not(target_arch = "wasm32"), schemars(length(min = 1)))]
    pub host: Option<String>,
    /// Prefix of the path, query string excluded.
    #[cfg_attr(not(target_arch = "wasm32"), schemars(pattern("^/")))]
    pub path_prefix: Option<String>,
    /// HTTP methods in capitals; empty means any method.
    #[serde(default)]
    #[cfg_attr(not(target_arch = "wasm32"), schemars(inner(pattern("^[A-Z]+$"))))]
    pub methods: Vec<String>,
}

/// A bound: at most `limit` requests per `window`, counted per `per`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[cfg_attr(not(target_arch = "wasm32"), derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct BoundConfig {
    /// Unique in its route; names the bound's stats. Defaults to `b0`, `b1`, …
    /// by position.
    #[cfg_attr(not(target_arch = "wasm32"), schemars(pattern(NAME_PATTERN)))]
    pub name: Option<String>,
    /// What the counter is keyed on: one counter per distinct value.
    pub per: Per,
    /// Requests admitted per window, per counter.
    #[cfg_attr(
        not(target_arch = "wasm32"),
        schemars(range(min = 1, max = 4_294_967_295u64))
    )]
    pub limit: u64,
    /// An ISO-8601 duration from one second to one day: `PT1S`, `PT10S`,
    /// `PT1M`, `PT1H`, `P1D`.
    #[cfg_attr(not(target_arch = "wasm32"), schemars(pattern(window_pattern())))]
    pub window: String,
}

/// What a bound's counter is keyed on.
#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize, PartialEq, Eq, Hash)]
#[cfg_attr(not(target_arch = "wasm32"), derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Per {
    /// One counter for the whole route.
    Route,
    /// One counter per client address.
    Address,
    /// One counter per user (needs an identity).
    User,
    /// One counter per API token (needs an identity).
    Token,
    /// One counter per organisation (needs an identity).
    Org,
}

#[cfg(not(target_arch = "wasm32"))]
fn window_pattern() -> String {
    WINDOW_PATTERN.replace('N', WINDOW_NUMBER)
}

impl BoundConfig {
    /// True when the bound counts every caller. Always, until bounds gain
    /// `applies_to`; then true exactly when it is empty.
    pub fn applies_to_everybody(&self) -> bool {
        true
    }

    /// Who the bound is about, in words ("anyone holding partner"), or
    /// `None` when it applies to everybody.
    pub fn audience(&self) -> Option<String> {
        None
    }

    /// True when the bound can only be checked once the caller's identity is
    /// known: it is keyed on one, or narrowed to some callers.
    pub fn needs_identity(&self) -> bool {
        self.per.needs_identity() || !self.applies_to_everybody()
    }
}

impl Per {
    /// True for the keys only an identity provides (user, token, org).
    pub fn needs_identity(self) -> bool {
        matches!(self, Per::User | Per::Token | Per::Org)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Per::Route => "route",
            Per::Address => "address",
            Per::User => "user",
            Per::Token => "token",
            Per::Org => "org",
        }
    }
}

fn default_instance() -> String {
    "ratebound".to_string()
}
fn default_true() -> bool {
    true
}

/// One problem in a configuration: where it is and what would be valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

fn err(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        path: path.into(),
        message: message.into(),
    }
}

/// Parses and validates a JSON configuration. Returns every error found.
pub fn parse(bytes: &[u8]) -> Result<Config, Vec<ConfigError>> {
    if bytes.len() > MAX_CONFIG_BYTES {
        return Err(vec![err(
            "$",
            format!(
                "configuration is {} bytes; at most {MAX_CONFIG_BYTES} are accepted",
                bytes.len()
            ),
        )]);
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        vec![err(
            "$",
            format!("configuration is not UTF-8 (byte {})", e.valid_up_to()),
        )]
    })?;
    let text = if text.trim().is_empty() { "{}" } else { text };
    let mut de = serde_json::Deserializer::from_str(text);
    let config: Config = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = json_path(&e.path().to_string());
        vec![err(path, structural_message(e.inner()))]
    })?;
    de.end()
        .map_err(|e| vec![err("$", format!("trailing characters: {e}"))])?;
    let errors = validate(&config);
    if errors.is_empty() {
        Ok(config)
    } else {
        Err(errors)
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

fn structural_message(e: &serde_json::Error) -> String {
    // serde_json appends "at line L column C"; keep it, it helps in big files.
    let msg = e.to_string();
    if msg.contains("unknown variant") && msg.contains("`route`") {
        format!("{msg} (per is what the counter is keyed on)")
    } else {
        msg
    }
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn validate(c: &Config) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    if !valid_name(&c.instance) {
        errors.push(err(
            "$.instance",
            "must be 1-64 characters of A-Z a-z 0-9 _ - (it prefixes shared-data keys and stats)",
        ));
    }
    let mut seen = std::collections::HashSet::new();
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
        let mut bound_names = std::collections::HashSet::new();
        for (j, b) in r.bounds.iter().enumerate() {
            let bt = format!("{at}.bounds[{j}]");
            if let Some(name) = &b.name {
                if !valid_name(name) {
                    errors.push(err(
                        format!("{bt}.name"),
                        "must be 1-64 characters of A-Z a-z 0-9 _ -",
                    ));
                }
            }
            let name = bound_name(b, j);
            if !bound_names.insert(name.clone()) {
                errors.push(err(
                    format!("{bt}.name"),
                    format!("duplicate bound name {name:?} in this route"),
                ));
            }
            if b.limit == 0 || b.limit > u64::from(u32::MAX) {
                errors.push(err(
                    format!("{bt}.limit"),
                    format!(
                        "{} is out of range: a limit is a whole number from 1 to {}",
                        b.limit,
                        u32::MAX
                    ),
                ));
            }
            if let Err(m) = window_ms(&b.window) {
                errors.push(err(format!("{bt}.window"), m));
            }
            if b.per.needs_identity() {
                errors.push(err(
                    format!("{bt}.per"),
                    format!(
                        "per {:?} needs a caller identity, and this build configures no identity source; use \"route\" or \"address\"",
                        b.per.as_str()
                    ),
                ));
            }
        }
    }
    errors
}

fn validate_match(m: &MatchConfig, at: &str, errors: &mut Vec<ConfigError>) {
    if let Some(p) = &m.path_prefix {
        if !p.starts_with('/') {
            errors.push(err(
                format!("{at}.path_prefix"),
                format!("{p:?} must start with '/'"),
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

/// A bound's name: its own, or its position (`b0`, `b1`, …).
pub fn bound_name(b: &BoundConfig, index: usize) -> String {
    b.name.clone().unwrap_or_else(|| format!("b{index}"))
}

/// Milliseconds of an ISO-8601 duration between one second and one day.
pub fn window_ms(s: &str) -> Result<u64, String> {
    let d = iso8601_duration::Duration::parse(s).map_err(|_| {
        format!(
            "{s:?} is not an ISO-8601 duration; write e.g. \"PT1S\", \"PT1M\", \"PT1H\" or \"P1D\""
        )
    })?;
    if d.year != 0.0 || d.month != 0.0 {
        return Err(format!(
            "{s:?} uses years or months, whose length varies; use days at most (\"P1D\")"
        ));
    }
    let ms = f64::from(d.day) * 86_400_000.0
        + f64::from(d.hour) * 3_600_000.0
        + f64::from(d.minute) * 60_000.0
        + f64::from(d.second) * 1_000.0;
    if !(ms.is_finite() && ms >= 0.0) || ms.fract() != 0.0 {
        return Err(format!("{s:?} must be a whole number of milliseconds"));
    }
    let ms = ms as u64;
    if !(MIN_WINDOW_MS..=MAX_WINDOW_MS).contains(&ms) {
        return Err(format!(
            "{s:?} is outside PT1S..P1D: below a second a sliding window measures jitter, past a day it is a quota that must survive restarts"
        ));
    }
    Ok(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(json: &str) -> Vec<String> {
        match parse(json.as_bytes()) {
            Ok(_) => vec![],
            Err(e) => e.iter().map(|e| e.to_string()).collect(),
        }
    }

    const GOOD: &str = r#"{"routes":[{"name":"hello","match":{"path_prefix":"/hello","methods":["GET"]},
        "bounds":[{"per":"address","limit":5,"window":"PT1M"}]}]}"#;

    #[test]
    fn good_config_parses_with_defaults() {
        let c = parse(GOOD.as_bytes()).unwrap();
        assert_eq!(c.instance, "ratebound");
        assert!(c.success_headers);
        assert_eq!(c.routes[0].bounds[0].limit, 5);
    }

    #[test]
    fn empty_configuration_is_an_empty_plan() {
        assert_eq!(parse(b"").unwrap().routes.len(), 0);
    }

    #[test]
    fn windows_outside_one_second_to_one_day_are_rejected() {
        assert_eq!(window_ms("PT1S"), Ok(1_000));
        assert_eq!(window_ms("P1D"), Ok(86_400_000));
        assert_eq!(window_ms("PT1M30S"), Ok(90_000));
        for bad in ["PT0S", "PT0.5S", "P2D", "P1M", "P1Y", "1m", "", "PT"] {
            assert!(window_ms(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_error_names_its_json_path() {
        let e = errors(
            r#"{"routes":[{"name":"a","bounds":[{"per":"address","limit":0,"window":"PT0S"}]},
                          {"name":"a","match":{"path_prefix":"x","methods":["get"]}}]}"#,
        );
        let want = [
            "$.routes[0].bounds[0].limit",
            "$.routes[0].bounds[0].window",
            "$.routes[1].name: duplicate",
            "$.routes[1].match.path_prefix",
            "$.routes[1].match.methods[0]",
        ];
        for w in want {
            assert!(e.iter().any(|m| m.starts_with(w)), "missing {w} in {e:?}");
        }
        assert_eq!(e.len(), want.len(), "{e:?}");
    }

    #[test]
    fn unknown_fields_and_wrong_types_are_rejected_with_a_path() {
        let e = errors(
            r#"{"routes":[{"name":"a","bounds":[{"per":"address","limit":5,"window":"PT1S","burst":3}]}]}"#,
        );
        assert!(e[0].starts_with("$.routes[0].bounds[0]"), "{e:?}");
        assert!(e[0].contains("unknown field `burst`"), "{e:?}");
        let e = errors(
            r#"{"routes":[{"name":"a","bounds":[{"per":"ip","limit":5,"window":"PT1S"}]}]}"#,
        );
        assert!(e[0].starts_with("$.routes[0].bounds[0].per"), "{e:?}");
        let e = errors(r#"{"routes":{"name":"a"}}"#);
        assert!(e[0].starts_with("$.routes"), "{e:?}");
    }

    #[test]
    fn identity_keyed_bounds_need_an_identity_source() {
        let e = errors(
            r#"{"routes":[{"name":"a","bounds":[{"per":"user","limit":5,"window":"PT1S"}]}]}"#,
        );
        assert!(e[0].starts_with("$.routes[0].bounds[0].per"), "{e:?}");
    }

    #[test]
    fn hostile_input_is_an_error_not_a_panic() {
        assert!(parse(&[0xff, 0xfe, 0x00]).is_err());
        let deep = "[".repeat(10_000);
        assert!(parse(deep.as_bytes()).is_err());
        assert!(parse(&vec![b' '; MAX_CONFIG_BYTES + 1]).is_err());
        assert!(parse(b"{} {}").is_err());
        // A top-level array: the path is `$[0]`, not `$.[0]`.
        let e = errors("[[[[1]]]]");
        assert!(e[0].starts_with("$[0]: "), "{e:?}");
    }
}

//! Cost bounds (`"cost"`): a request counts the units its header or its
//! response names instead of 1. Validation here; compiled, a bound's
//! [`Cost`].

use super::error::{err, ConfigError};
use super::model::{BoundConfig, CostConfig};
use super::names::is_header_name;

/// The range `max_body_bytes` is still accepted in (no longer used: a
/// body of any size is read).
pub const MAX_BODY_BYTES: usize = 1_048_576;

/// Where a request's cost is read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CostSource {
    /// A request header: known at admission.
    RequestHeader(String),
    /// A response header.
    ResponseHeader(String),
    /// A response trailer (gRPC), or the header of the same name in a
    /// response that is all headers (gRPC's trailers-only answer).
    ResponseTrailer(String),
    /// A JSON pointer into the response body.
    ResponseJson(String),
}

/// A bound's cost, compiled.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cost {
    pub source: CostSource,
    /// Units taken at admission for a cost the response gives (and the
    /// charge of a request whose cost never comes).
    pub reserve: u32,
    pub unit: String,
}

impl Cost {
    pub fn compile(c: &CostConfig) -> Option<Cost> {
        let source = match (
            &c.request_header,
            &c.response_header,
            &c.response_trailer,
            &c.response_json,
        ) {
            (Some(h), None, None, None) => CostSource::RequestHeader(h.clone()),
            (None, Some(h), None, None) => CostSource::ResponseHeader(h.clone()),
            (None, None, Some(h), None) => CostSource::ResponseTrailer(h.clone()),
            (None, None, None, Some(p)) => CostSource::ResponseJson(p.clone()),
            _ => return None,
        };
        Some(Cost {
            source,
            reserve: c
                .reserve
                .map_or(1, |r| u32::try_from(r).unwrap_or(u32::MAX)),
            unit: c.unit.clone().unwrap_or_else(|| "units".to_string()),
        })
    }

    /// Known only once the response comes: taken as `reserve` at
    /// admission, trued up then.
    pub fn from_response(&self) -> bool {
        !matches!(self.source, CostSource::RequestHeader(_))
    }
}

/// A bound's `cost` at `at` (`$.routes[i].bounds[j]`).
pub fn validate(b: &BoundConfig, at: &str, errors: &mut Vec<ConfigError>) {
    let Some(c) = &b.cost else {
        return;
    };
    let at = format!("{at}.cost");
    let given = [
        &c.request_header,
        &c.response_header,
        &c.response_trailer,
        &c.response_json,
    ]
    .iter()
    .filter(|s| s.is_some())
    .count();
    if given != 1 {
        errors.push(err(
            &at,
            "give exactly one of \"request_header\" (a number the request names: \"x-cost\"), \
             \"response_header\" (one its response names), \"response_trailer\" (one its \
             response's trailers name, as gRPC services do) or \"response_json\" (a JSON \
             pointer into its response body: \"/usage/total_tokens\")",
        ));
    }
    for (field, h) in [
        ("request_header", &c.request_header),
        ("response_header", &c.response_header),
        ("response_trailer", &c.response_trailer),
    ] {
        if let Some(h) = h.as_deref().filter(|h| !is_header_name(h)) {
            errors.push(err(
                format!("{at}.{field}"),
                format!("{h:?} is not a lowercase header name; e.g. \"x-cost\""),
            ));
        }
    }
    if let Some(p) = c.response_json.as_deref().filter(|p| !p.starts_with('/')) {
        errors.push(err(
            format!("{at}.response_json"),
            format!(
                "{p:?} is not a JSON pointer: it starts with '/', e.g. \"/usage/total_tokens\""
            ),
        ));
    }
    if let Some(r) = c.reserve {
        if c.request_header.is_some() {
            errors.push(err(
                format!("{at}.reserve"),
                "a cost in a request header is known at admission: nothing is reserved; \
                 remove \"reserve\"",
            ));
        } else if r == 0 || r > b.limit {
            errors.push(err(
                format!("{at}.reserve"),
                format!(
                    "{r} is out of range: reserve 1 to the bound's limit ({}) at admission",
                    b.limit
                ),
            ));
        }
    }
    if let Some(n) = c.max_body_bytes {
        if c.response_json.is_none() {
            errors.push(err(
                format!("{at}.max_body_bytes"),
                "only a \"response_json\" cost reads the body: remove \"max_body_bytes\"",
            ));
        } else if !(64..=MAX_BODY_BYTES).contains(&n) {
            errors.push(err(
                format!("{at}.max_body_bytes"),
                format!("{n} is out of range: read 64 bytes to 1 MiB of a response body"),
            ));
        }
    }
    if let Some(u) = c.unit.as_deref() {
        let word = !u.is_empty() && u.len() <= 32 && u.chars().all(|ch| ch.is_ascii_alphabetic());
        if !word {
            errors.push(err(
                format!("{at}.unit"),
                format!("{u:?}: give a word of 1-32 letters, e.g. \"tokens\""),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    fn errors(json: &str) -> Vec<String> {
        match crate::config::parse(json.as_bytes()) {
            Ok(_) => vec![],
            Err(e) => e.iter().map(|e| e.to_string()).collect(),
        }
    }

    fn bound(cost: &str, extra: &str) -> String {
        let service = if extra.contains("scope") {
            r#""rate_limit_service":{"cluster":"rls","domain":"d"},"#
        } else {
            ""
        };
        format!(
            r#"{{{service}"routes":[{{"name":"a","bounds":[
            {{"per":"address","limit":100,"window":"PT1M","cost":{cost}{extra}}}]}}]}}"#
        )
    }

    #[test]
    fn a_cost_names_one_source_and_its_reservation_fits() {
        assert!(errors(&bound(
            r#"{"response_json":"/usage/total_tokens","reserve":50,"unit":"tokens"}"#,
            ""
        ))
        .is_empty());
        // Every scope counts cost: the service's counts take it as `hits_addend`.
        for scope in ["fleet", "installation"] {
            let extra = format!(r#","scope":"{scope}""#);
            let e = errors(&bound(r#"{"response_json":"/u","reserve":5}"#, &extra));
            assert!(e.is_empty(), "{scope}: {e:?}");
        }
        let at = "$.routes[0].bounds[0].cost";
        for (cost, extra, path, says) in [
            (r#"{}"#, "", at.to_string(), "give exactly one of"),
            (
                r#"{"request_header":"x-cost","response_json":"/u"}"#,
                "",
                at.to_string(),
                "give exactly one of",
            ),
            (
                r#"{"request_header":"X Cost"}"#,
                "",
                format!("{at}.request_header"),
                "not a lowercase header name",
            ),
            (
                r#"{"response_json":"usage.total"}"#,
                "",
                format!("{at}.response_json"),
                "not a JSON pointer",
            ),
            (
                r#"{"request_header":"x-cost","reserve":3}"#,
                "",
                format!("{at}.reserve"),
                "known at admission",
            ),
            (
                r#"{"response_header":"x-t","reserve":101}"#,
                "",
                format!("{at}.reserve"),
                "out of range",
            ),
            (
                r#"{"response_header":"x-t","max_body_bytes":100}"#,
                "",
                format!("{at}.max_body_bytes"),
                "only a \"response_json\"",
            ),
            (
                r#"{"response_json":"/u","unit":"tok ens"}"#,
                "",
                format!("{at}.unit"),
                "a word",
            ),
        ] {
            let e = errors(&bound(cost, extra));
            assert!(
                e.iter()
                    .any(|e| e.starts_with(&format!("{path}: ")) && e.contains(says)),
                "{cost}{extra}: {e:?}"
            );
        }
    }
}

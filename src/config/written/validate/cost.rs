//! A bound's `cost`: one source, a reservation that fits.

use super::super::error::{err, ConfigError};
use super::super::names::is_header_name;
use super::super::{BoundConfig, CheckedCost, CostConfig, CostSource};

/// The range `max_body_bytes` is still accepted in (no longer used: a
/// body of any size is read).
const MAX_BODY_BYTES: usize = 1_048_576;

/// A bound's `cost` at `at` (`$.routes[i].bounds[j]`): `Some` of its
/// typed values (`None` without a cost) when it is valid.
pub(super) fn validate(
    b: &BoundConfig,
    at: &str,
    errors: &mut Vec<ConfigError>,
) -> Option<Option<CheckedCost>> {
    let Some(c) = &b.cost else {
        return Some(None);
    };
    let before = errors.len();
    let at = format!("{at}.cost");
    let parts = c.input_json.is_some() || c.output_json.is_some();
    let given = [
        &c.request_header,
        &c.response_header,
        &c.response_trailer,
        &c.response_json,
    ]
    .iter()
    .filter(|s| s.is_some())
    .count()
        + usize::from(parts);
    if parts && (c.input_json.is_none() || c.output_json.is_none()) {
        let missing = if c.input_json.is_none() {
            "input_json"
        } else {
            "output_json"
        };
        errors.push(err(
            format!("{at}.{missing}"),
            "give both \"input_json\" and \"output_json\" (e.g. \"/usage/prompt_tokens\" and \
             \"/usage/completion_tokens\"): the cost is their sum, or their price",
        ));
    }
    if given != 1 {
        errors.push(err(
            &at,
            "give exactly one of \"request_header\" (a number the request names: \"x-cost\"), \
             \"response_header\" (one its response names), \"response_trailer\" (one its \
             response's trailers name, as gRPC services do) or \"response_json\" (a JSON \
             pointer into its response body: \"/usage/total_tokens\"), or \"input_json\" with \
             \"output_json\" (pointers to the input and output tokens, summed or priced)",
        ));
    }
    if let Some(table) = &c.prices {
        if !parts {
            errors.push(err(
                format!("{at}.prices"),
                "prices weigh input and output tokens: give \"input_json\" and \"output_json\" \
                 instead of \"response_json\"",
            ));
        }
        if table.is_empty() {
            errors.push(err(
                format!("{at}.prices"),
                "name at least one model: {\"gpt-4o\": {\"input\": 2.5, \"output\": 10}}",
            ));
        }
        for (model, p) in table {
            for (side, x) in [("input", p.input), ("output", p.output)] {
                if !(0.0..=1e6).contains(&x) {
                    errors.push(err(
                        format!("{at}.prices.{model}.{side}"),
                        format!("{x} is out of range: a price of 0 to 1,000,000 units a token"),
                    ));
                }
            }
        }
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
    for (field, p, e) in [
        ("response_json", &c.response_json, "/usage/total_tokens"),
        ("input_json", &c.input_json, "/usage/prompt_tokens"),
        ("output_json", &c.output_json, "/usage/completion_tokens"),
    ] {
        if let Some(p) = p.as_deref().filter(|p| !p.starts_with('/')) {
            errors.push(err(
                format!("{at}.{field}"),
                format!("{p:?} is not a JSON pointer: it starts with '/', e.g. \"{e}\""),
            ));
        }
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
    let json = c.response_json.is_some() || parts;
    let json_only = [
        ("reserve_floor", c.reserve_floor.is_some()),
        ("reserve_ceiling", c.reserve_ceiling.is_some()),
        ("ask_usage", c.ask_usage.is_some()),
        ("max_request_bytes", c.max_request_bytes.is_some()),
    ];
    for (field, given) in json_only {
        if given && !json {
            errors.push(err(
                format!("{at}.{field}"),
                format!("only a \"response_json\" cost reads the request body: remove \"{field}\""),
            ));
        }
    }
    for (field, n) in [
        ("reserve_floor", c.reserve_floor),
        ("reserve_ceiling", c.reserve_ceiling),
    ] {
        let Some(n) = n else { continue };
        if c.reserve.is_some() {
            errors.push(err(
                format!("{at}.{field}"),
                format!(
                    "\"reserve\" fixes the reservation: remove \"{field}\", or remove \"reserve\" \
                     to reserve what each request allows itself"
                ),
            ));
        } else if n == 0 || n > b.limit {
            errors.push(err(
                format!("{at}.{field}"),
                format!("{n} is out of range: 1 to the bound's limit ({})", b.limit),
            ));
        }
    }
    if let (Some(lo), Some(hi)) = (c.reserve_floor, c.reserve_ceiling) {
        if lo > hi {
            errors.push(err(
                format!("{at}.reserve_floor"),
                format!(
                    "{lo} is above \"reserve_ceiling\" ({hi}): give a floor at most the ceiling"
                ),
            ));
        }
    }
    if let Some(n) = c.max_request_bytes {
        if !(1024..=64 << 20).contains(&n) {
            errors.push(err(
                format!("{at}.max_request_bytes"),
                format!("{n} is out of range: read 1 KiB to 64 MiB of a request body"),
            ));
        }
    }
    if let Some(n) = c.max_body_bytes {
        if !json {
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
    if errors.len() > before {
        return None;
    }
    // Valid: one source, reservations of 1 to the bound's limit.
    let reservation = |n: Option<u64>| n.map(u32::try_from).transpose().ok();
    Some(Some(CheckedCost {
        source: source(c)?,
        reserve: reservation(c.reserve)?,
        reserve_floor: reservation(c.reserve_floor)?,
        reserve_ceiling: reservation(c.reserve_ceiling)?,
    }))
}

/// The one place a cost is read, when it names exactly one.
fn source(c: &CostConfig) -> Option<CostSource> {
    let parts = match (&c.input_json, &c.output_json) {
        (Some(i), Some(o)) => Some(CostSource::ResponseParts {
            input: i.clone(),
            output: o.clone(),
        }),
        (None, None) => None,
        _ => return None,
    };
    Some(
        match (
            &c.request_header,
            &c.response_header,
            &c.response_trailer,
            &c.response_json,
            parts,
        ) {
            (Some(h), None, None, None, None) => CostSource::RequestHeader(h.clone()),
            (None, Some(h), None, None, None) => CostSource::ResponseHeader(h.clone()),
            (None, None, Some(h), None, None) => CostSource::ResponseTrailer(h.clone()),
            (None, None, None, Some(p), None) => CostSource::ResponseJson(p.clone()),
            (None, None, None, None, Some(parts)) => parts,
            _ => return None,
        },
    )
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
                r#"{"response_header":"x-t","ask_usage":true}"#,
                "",
                format!("{at}.ask_usage"),
                "only a \"response_json\" cost reads the request body",
            ),
            (
                r#"{"response_json":"/u","reserve":5,"reserve_floor":2}"#,
                "",
                format!("{at}.reserve_floor"),
                "\"reserve\" fixes the reservation",
            ),
            (
                r#"{"response_json":"/u","reserve_ceiling":101}"#,
                "",
                format!("{at}.reserve_ceiling"),
                "out of range",
            ),
            (
                r#"{"response_json":"/u","reserve_floor":50,"reserve_ceiling":40}"#,
                "",
                format!("{at}.reserve_floor"),
                "above \"reserve_ceiling\"",
            ),
            (
                r#"{"response_json":"/u","max_request_bytes":100}"#,
                "",
                format!("{at}.max_request_bytes"),
                "out of range",
            ),
            (
                r#"{"input_json":"/i"}"#,
                "",
                format!("{at}.output_json"),
                "give both",
            ),
            (
                r#"{"response_json":"/u","prices":{"m":{"input":1,"output":1}}}"#,
                "",
                format!("{at}.prices"),
                "prices weigh input and output tokens",
            ),
            (
                r#"{"input_json":"/i","output_json":"/o","prices":{"m":{"input":-1,"output":1}}}"#,
                "",
                format!("{at}.prices.m.input"),
                "out of range",
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

//! Cost bounds (`"cost"`): a request counts the units its header or its
//! response names instead of 1. Validation here; compiled, a bound's
//! [`Cost`].

use super::error::{err, ConfigError};
use super::model::{BoundConfig, CostConfig, PriceConfig};
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
    /// JSON pointers to the input and the output tokens in the response
    /// body, summed or priced.
    ResponseParts { input: String, output: String },
}

/// A price table: millionths of the unit a token in and a token out, by
/// model (integers, so a charge is exact and the cost hashable).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Prices {
    pub models: Vec<(String, (u64, u64))>,
    /// Any other model's (`"*"`, or the table's highest).
    pub other: (u64, u64),
}

/// One unit, in millionths.
const WHOLE: u64 = 1_000_000;

fn millionths(p: &PriceConfig) -> (u64, u64) {
    let m = |x: f64| (x.clamp(0.0, 1e6) * WHOLE as f64).round() as u64;
    (m(p.input), m(p.output))
}

/// A bound's cost, compiled.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cost {
    pub source: CostSource,
    /// Units taken at admission for a cost the response gives (and the
    /// charge of a request whose cost never comes): `reserve`, or the
    /// floor of what the request allows itself (`from_request`).
    pub reserve: u32,
    /// A `response_json` cost without `reserve`: the reservation is what
    /// the request allows itself, at most this ceiling.
    pub from_request: Option<u32>,
    /// A stream that does not ask for its usage is made to
    /// (`stream_options.include_usage`).
    pub ask_usage: bool,
    /// The largest request body read before admission.
    pub max_request_bytes: usize,
    /// Prices by the request's model (`ResponseParts` only).
    pub prices: Option<Prices>,
    pub unit: String,
}

impl CostSource {
    /// Read in the response's body (`response_json`, or its parts).
    pub fn in_body(&self) -> bool {
        matches!(
            self,
            CostSource::ResponseJson(_) | CostSource::ResponseParts { .. }
        )
    }

    /// The pointer an answer's usage event names (the output's, for parts).
    pub fn usage_pointer(&self) -> Option<&str> {
        match self {
            CostSource::ResponseJson(p) => Some(p),
            CostSource::ResponseParts { output, .. } => Some(output),
            _ => None,
        }
    }
}

/// A request body read before admission, by default: 4 MiB (a prompt of a
/// million tokens).
pub const MAX_REQUEST_BYTES: usize = 4 << 20;

impl Cost {
    /// `c` compiled, for a bound of `limit`.
    pub fn compile(c: &CostConfig, limit: u64) -> Option<Cost> {
        let parts = match (&c.input_json, &c.output_json) {
            (Some(i), Some(o)) => Some(CostSource::ResponseParts {
                input: i.clone(),
                output: o.clone(),
            }),
            (None, None) => None,
            _ => return None,
        };
        let source = match (
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
        };
        let units = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        let json = source.in_body();
        let prices = c.prices.as_ref().map(|table| {
            let models: Vec<(String, (u64, u64))> = table
                .iter()
                .filter(|(m, _)| m.as_str() != "*")
                .map(|(m, p)| (m.clone(), millionths(p)))
                .collect();
            let highest = models
                .iter()
                .fold((0, 0), |(i, o), (_, (pi, po))| (i.max(*pi), o.max(*po)));
            Prices {
                other: table.get("*").map_or(highest, millionths),
                models,
            }
        });
        let from_request = (json && c.reserve.is_none())
            .then(|| units(c.reserve_ceiling.unwrap_or(limit).min(limit)));
        Some(Cost {
            source,
            reserve: units(c.reserve.or(c.reserve_floor).unwrap_or(1)),
            from_request,
            ask_usage: json && c.ask_usage.unwrap_or(true),
            max_request_bytes: c.max_request_bytes.unwrap_or(MAX_REQUEST_BYTES),
            prices,
            unit: c.unit.clone().unwrap_or_else(|| "units".to_string()),
        })
    }

    /// Known only once the response comes: taken as `reserve` at
    /// admission, trued up then.
    pub fn from_response(&self) -> bool {
        !matches!(self.source, CostSource::RequestHeader(_))
    }

    /// The request body is read before admission: for the reservation it
    /// allows itself, or to ask for its usage.
    pub fn reads_request(&self) -> bool {
        self.from_request.is_some() || self.ask_usage
    }

    /// What a request for `model` that allows itself `ceiling` output
    /// tokens and sends a prompt of `prompt` tokens takes at admission.
    pub fn reservation(&self, ceiling: Option<u32>, prompt: u32, model: Option<&str>) -> u32 {
        match self.from_request {
            Some(most) => self
                .units(prompt, ceiling.unwrap_or(0), model)
                .clamp(self.reserve.min(most), most),
            None => self.reserve.max(self.units(prompt, 0, model)),
        }
    }

    /// What `input` tokens in and `output` tokens out cost, for `model`:
    /// their sum, or their price (rounded up) when the cost has prices.
    pub fn units(&self, input: u32, output: u32, model: Option<&str>) -> u32 {
        let Some(prices) = &self.prices else {
            return input.saturating_add(output);
        };
        let (pi, po) = model
            .and_then(|m| prices.models.iter().find(|(name, _)| name == m))
            .map_or(prices.other, |(_, p)| *p);
        let total = u128::from(input) * u128::from(pi) + u128::from(output) * u128::from(po);
        u32::try_from(total.div_ceil(u128::from(WHOLE))).unwrap_or(u32::MAX)
    }
}

/// A bound's `cost` at `at` (`$.routes[i].bounds[j]`).
pub fn validate(b: &BoundConfig, at: &str, errors: &mut Vec<ConfigError>) {
    let Some(c) = &b.cost else {
        return;
    };
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
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_price_table_weighs_tokens_in_and_out_by_model() {
        let c: crate::config::model::CostConfig = serde_json::from_str(
            r#"{"input_json":"/i","output_json":"/o","prices":{
                "a":{"input":0.5,"output":2},"b":{"input":3,"output":1},"*":{"input":1,"output":1}}}"#,
        )
        .unwrap();
        let cost = super::Cost::compile(&c, 1_000_000).unwrap();
        assert_eq!(cost.units(10, 10, Some("a")), 25);
        assert_eq!(cost.units(10, 10, Some("b")), 40);
        assert_eq!(cost.units(10, 10, Some("zzz")), 20);
        // Rounded up, never down.
        assert_eq!(cost.units(1, 0, Some("a")), 1);
        // Without "*": the highest price in and the highest out.
        let c: crate::config::model::CostConfig = serde_json::from_str(
            r#"{"input_json":"/i","output_json":"/o","prices":{
                "a":{"input":0.5,"output":2},"b":{"input":3,"output":1}}}"#,
        )
        .unwrap();
        let cost = super::Cost::compile(&c, 1_000_000).unwrap();
        assert_eq!(cost.units(10, 10, None), 50);
        // Unpriced parts are summed.
        let c: crate::config::model::CostConfig =
            serde_json::from_str(r#"{"input_json":"/i","output_json":"/o"}"#).unwrap();
        let cost = super::Cost::compile(&c, 1_000_000).unwrap();
        assert_eq!(cost.units(7, 5, Some("a")), 12);
    }

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

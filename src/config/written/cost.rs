//! A bound's `cost` as written: where a request's units are read, and
//! their prices.

use serde::Deserialize;

/// Where a request's cost is read, and in what unit it is said.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CostConfig {
    /// A request header carrying the cost, known at admission
    /// (`x-cost`).
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub request_header: Option<String>,
    /// A response header carrying the cost (`x-tokens`).
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub response_header: Option<String>,
    /// A response trailer carrying the cost, as gRPC services send it
    /// after the last message (`x-tokens`).
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub response_trailer: Option<String>,
    /// A JSON pointer into the response's JSON body
    /// (`/usage/total_tokens`).
    #[cfg_attr(feature = "schema", schemars(pattern("^/")))]
    pub response_json: Option<String>,
    /// With `output_json`, instead of `response_json`: JSON pointers to
    /// the input (prompt) tokens and the output tokens of the response's
    /// body, each the last event naming it (Anthropic's `message_start`
    /// and `message_delta`), summed, or weighed by `prices`.
    #[cfg_attr(feature = "schema", schemars(pattern("^/")))]
    pub input_json: Option<String>,
    #[cfg_attr(feature = "schema", schemars(pattern("^/")))]
    pub output_json: Option<String>,
    /// What a token in and a token out cost, in `unit`, by the request
    /// body's `model` (`"*"`: any other model; without it, another model
    /// is charged the table's highest prices): `{"gpt-4o": {"input": 2.5,
    /// "output": 10}}` with `unit` "microdollars" makes a bound a budget in
    /// money. Needs `input_json` and `output_json`.
    pub prices: Option<std::collections::BTreeMap<String, PriceConfig>>,
    /// What the cost counts, said in `explain` and the console
    /// (`tokens`); `units` by default.
    pub unit: Option<String>,
    /// Units taken at admission for a cost the response gives, trued up
    /// when it is known: the request is admitted when they fit, and
    /// requests in flight cannot all pass on an empty counter. A request
    /// whose cost never comes (reset, error, no usable figure) is charged
    /// this, or what its answer delivered if that is more (its text at 4
    /// bytes a token). What a number means: a caller with k requests in
    /// flight can pass the limit by at most k × (largest cost − reserve).
    /// Unset, a `response_json` cost reserves what the request allows
    /// itself (its `max_tokens`, `max_completion_tokens` or
    /// `max_output_tokens`, plus its prompt at 4 bytes a token) between
    /// `reserve_floor` and `reserve_ceiling`; any other cost reserves 1.
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 4_294_967_295u64)))]
    pub reserve: Option<u64>,
    /// The least a `response_json` cost without `reserve` takes at
    /// admission (1 by default).
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 4_294_967_295u64)))]
    pub reserve_floor: Option<u64>,
    /// The most a `response_json` cost without `reserve` takes at
    /// admission (the bound's limit by default).
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 4_294_967_295u64)))]
    pub reserve_ceiling: Option<u64>,
    /// A streaming request (`"stream": true`) that does not ask for its
    /// usage is made to (`stream_options.include_usage: true`, added to its
    /// JSON body), and the usage event it did not ask for is taken out of
    /// the stream it sees. On by default for a `response_json` cost.
    pub ask_usage: Option<bool>,
    /// The largest request body a `response_json` cost reads before
    /// admission (4 MiB by default; 1 KiB to 64 MiB): a larger one is
    /// refused with 413, never forwarded unread. Envoy's own buffer limit
    /// (the listener's `per_connection_buffer_limit_bytes`) must be at
    /// least this, or Envoy refuses first.
    #[cfg_attr(feature = "schema", schemars(range(min = 1024, max = 67_108_864)))]
    pub max_request_bytes: Option<usize>,
    /// No longer used: a `response_json` cost reads a body of any size as
    /// it passes, keeping none of it. Still accepted (64 to 1 MiB), so
    /// configurations that give it stay valid.
    #[cfg_attr(feature = "schema", schemars(range(min = 64, max = 1_048_576)))]
    pub max_body_bytes: Option<usize>,
}

/// What one token costs, in a cost's unit: in (the prompt) and out.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    #[cfg_attr(feature = "schema", schemars(range(min = 0, max = 1_000_000)))]
    pub input: f64,
    #[cfg_attr(feature = "schema", schemars(range(min = 0, max = 1_000_000)))]
    pub output: f64,
}

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

impl CostSource {
    /// Read in the response's body (`response_json`, or its parts).
    pub(crate) fn in_body(&self) -> bool {
        matches!(
            self,
            CostSource::ResponseJson(_) | CostSource::ResponseParts { .. }
        )
    }

    /// The pointer an answer's usage event names (the output's, for parts).
    pub(crate) fn usage_pointer(&self) -> Option<&str> {
        match self {
            CostSource::ResponseJson(p) => Some(p),
            CostSource::ResponseParts { output, .. } => Some(output),
            _ => None,
        }
    }
}

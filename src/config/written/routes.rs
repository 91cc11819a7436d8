//! Routes as written: what a route matches, its operations, and its
//! bounds (their key, scope, window and limit).

use super::{Access, AccountSource, CostConfig};
#[cfg(feature = "schema")]
use super::{HOST_PATTERN, NAME_PATTERN};
use serde::Deserialize;

// One enum for the scope as written, as compiled
// (`plan::BoundScope::kind`) and as `diff` reports it.
/// Where a bound's counter lives.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// In this Envoy's shared data: every Envoy counts on its own.
    #[default]
    Node,
    /// In the rate-limit service (Redis): one count for the installation,
    /// kept across restarts; sliding (the two-window estimate) unless its
    /// `shape` says `fixed`.
    Installation,
    /// Decided in this Envoy's shared data against the whole fleet's count,
    /// which each node reconciles with the rate-limit service every
    /// `sync_ms` in the background: one budget, no call per request.
    Fleet,
}

impl Scope {
    /// Counted in this Envoy's shared data (node and fleet bounds): the
    /// bound has a lane.
    pub fn in_shared_data(self) -> bool {
        self != Scope::Installation
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Node => "node",
            Scope::Installation => "installation",
            Scope::Fleet => "fleet",
        }
    }
}

/// How an installation bound's count moves with time.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Shape {
    /// The two-window estimate, as node and fleet bounds: the attempt is
    /// counted in its clock window and the previous window is read, in the
    /// same call; no reset at a window's edge.
    #[default]
    Sliding,
    /// The service's own clock windows: the count resets at each edge, so
    /// up to 2× the limit gets through around one. Only where asked.
    Fixed,
}

impl Shape {
    pub fn as_str(self) -> &'static str {
        match self {
            Shape::Sliding => "sliding",
            Shape::Fixed => "fixed",
        }
    }
}

/// A set of requests (its `match`) and the bounds they are counted against.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Unique among routes; names the route's stats.
    #[cfg_attr(feature = "schema", schemars(pattern(NAME_PATTERN)))]
    pub name: String,
    /// Which requests the route takes; every condition given must hold, and
    /// an empty match takes every request.
    #[serde(default, rename = "match")]
    pub matching: MatchConfig,
    /// Every bound applies: the first one exceeded refuses.
    #[serde(default)]
    pub bounds: Vec<BoundConfig>,
    /// Operations of the route's OpenAPI inventory that carry bounds of
    /// their own, on top of the route's. Only the operations listed: there
    /// is no default over the whole inventory.
    #[serde(default)]
    pub operations: Vec<OperationConfig>,
    /// Where the route's requests name an account, for `per: account`.
    pub account: Option<AccountSource>,
}

/// One operation (HTTP method + OpenAPI path template) and its own bounds:
/// a counter per operation and per caller.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct OperationConfig {
    /// Names the operation's stats; defaults to `operation_id`.
    #[cfg_attr(feature = "schema", schemars(pattern(NAME_PATTERN)))]
    pub name: Option<String>,
    /// The OpenAPI `operationId`, for reference and for the CLI.
    pub operation_id: Option<String>,
    /// In capitals, e.g. `POST`.
    #[cfg_attr(feature = "schema", schemars(pattern("^[A-Z]+$")))]
    pub method: String,
    /// An OpenAPI path template, e.g. `/orders/{id}/pay`.
    #[cfg_attr(feature = "schema", schemars(pattern("^/")))]
    pub path: String,
    pub bounds: Vec<BoundConfig>,
}

/// Conditions on a request; omitted ones accept anything.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct MatchConfig {
    /// Envoy's route `name` (the `xds.route_name` property).
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub route_name: Option<String>,
    /// Exact `:authority`, case-insensitive, one trailing dot ignored;
    /// without a port it matches any port.
    #[cfg_attr(feature = "schema", schemars(length(min = 1), pattern(HOST_PATTERN)))]
    pub host: Option<String>,
    /// Prefix of the path, query string excluded (so no `?` or `#`).
    #[cfg_attr(feature = "schema", schemars(pattern("^/[^?#]*$")))]
    pub path_prefix: Option<String>,
    /// HTTP methods in capitals; empty means any method.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(inner(pattern("^[A-Z]+$"))))]
    pub methods: Vec<String>,
}

/// A bound: at most `limit` requests per `window`, counted per `per`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct BoundConfig {
    /// Unique in its route; names the bound's stats. Defaults to `b0`, `b1`, …
    /// by position.
    #[cfg_attr(feature = "schema", schemars(pattern(NAME_PATTERN)))]
    pub name: Option<String>,
    /// What the counter is keyed on: one counter per distinct value.
    pub per: Per,
    /// Who the bound is about; empty means everybody.
    #[serde(default)]
    pub applies_to: Access,
    /// Requests admitted per window, per counter.
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 4_294_967_295u64)))]
    pub limit: u64,
    /// An ISO-8601 duration of whole seconds from one second to one day:
    /// `PT1S`, `PT30S`, `PT1M`, `PT1H30M`, `P1D`. Days, then `T` and hours,
    /// minutes, seconds, each a whole number; after the first part, hours
    /// stay below 24 and minutes and seconds below 60 (`PT90S` or `PT1M30S`,
    /// not `PT1M90S`).
    #[cfg_attr(feature = "schema", schemars(pattern(window_pattern())))]
    pub window: String,
    /// Count and set headers, never refuse; `would_refuse` says what
    /// enforcement would have done.
    #[serde(default)]
    pub shadow: bool,
    /// The share of this bound's refusals carried out, 0 to 100 (the
    /// top-level `enforce_percent`, or 100): a rollout from shadow to
    /// enforced in steps. A refusal spared is a shadow bound's: let
    /// through, not counted, `would_refuse`. Changing it keeps the
    /// bound's counts.
    #[cfg_attr(feature = "schema", schemars(range(min = 0, max = 100)))]
    pub enforce_percent: Option<u32>,
    /// What one request counts, when not 1: a number the request names in
    /// a header, or one its response names (a header, or a field of its
    /// JSON body, such as an LLM API's tokens). Node bounds only.
    pub cost: Option<CostConfig>,
    /// `node` (each Envoy counts on its own, sliding window),
    /// `installation` (the rate-limit service counts for all of them,
    /// sliding window of `PT1S`, `PT1M`, `PT1H` or `P1D`) or `fleet` (one budget
    /// for all of them, decided on each node from counts synced every
    /// `sync_ms`; sliding window of `PT1S`, `PT1M`, `PT1H` or `P1D`).
    #[serde(default)]
    pub scope: Scope,
    /// An installation bound's shape: `sliding` (the default: the
    /// two-window estimate over the service's counts of two windows) or `fixed`
    /// (the service's clock windows, which reset at each edge).
    pub shape: Option<Shape>,
}

/// What a bound's counter is keyed on.
#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// One counter per account a sign-in request tries (the route's
    /// `account`); installation bounds only.
    Account,
    /// One counter per model a request's JSON body asks for (its `model`,
    /// read once, as a cost's request is read: one reading or a refusal);
    /// on a route whose cost its answer names (`response_json`, or
    /// `input_json` and `output_json`). A request naming no model is
    /// counted per address.
    Model,
}

/// Exactly the windows [`window_ms`] accepts.
#[cfg(feature = "schema")]
fn window_pattern() -> String {
    super::duration::pattern()
}

/// True when a bound keyed `per`, narrowed to `applies_to`, can only be
/// checked once the caller's identity is known: it is keyed on one, or
/// narrowed to some callers (written and compiled bounds alike).
pub fn needs_identity(per: Per, applies_to: &Access) -> bool {
    per.needs_identity() || !applies_to.is_everybody()
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
            Per::Account => "account",
            Per::Model => "model",
        }
    }
}

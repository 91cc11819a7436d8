//! The configuration as users write it (Envoy `configuration`, Istio
//! `pluginConfig`): the serde types, with the JSON Schema annotations the
//! CLI publishes, and [`parse`], which reads the text and checks it. Nothing
//! here knows the compiled plan ([`crate::config::plan`]) that is made of it.
//!
//! - this file: the root [`WrittenConfig`] and its response settings; beside it
//!   routes (matches, operations, bounds), identity sources, the
//!   [`RateLimitServiceConfig`] and a bound's [`CostConfig`];
//! - `validate`: [`parse`] and every check, by concern, with JSON paths;
//! - [`ConfigError`], the [`Unit`]s the rate-limit service keeps, the names
//!   and the windows ([`window_ms`]) a configuration may give.

mod checked;
mod cost;
mod duration;
mod error;
mod identity;
mod names;
mod routes;
mod service;
mod unit;
mod validate;

pub use checked::*;
pub use cost::*;
pub use duration::{window_ms, WindowError};
pub use error::{number, ConfigError, ErrorKind};
pub use identity::*;
pub use routes::*;
pub use service::*;
pub use unit::*;
pub use validate::*;

use serde::Deserialize;

/// What `valid_name` accepts, for the JSON Schema.
#[cfg(feature = "schema")]
const NAME_PATTERN: &str = "^[A-Za-z0-9_-]{1,64}$";
/// What [`crate::config::normalize::check_authority`] accepts: a host name or a
/// bracketed IPv6 address, then at most a port from 1 to 65535.
#[cfg(feature = "schema")]
const HOST_PATTERN: &str = r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~!$&'()*+,;=%-]+)(?::0*(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?$";
/// A cookie name: an RFC 6265 token, as `is_cookie_name` checks.
#[cfg(feature = "schema")]
const COOKIE_PATTERN: &str = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";

/// Largest accepted configuration, so a hostile file cannot make us allocate
/// without bound before we even look at it.
pub const MAX_CONFIG_BYTES: usize = 1 << 20;
// serde_json refuses nesting deeper than 128 itself; our schema is 5 deep.

/// The configuration of a ratebound filter (Envoy `configuration`, Istio
/// `pluginConfig`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(title = "ratebound filter configuration"))]
#[serde(deny_unknown_fields)]
pub struct WrittenConfig {
    /// The JSON Schema the file follows, for editors (e.g. a path or URL to
    /// `ratebound.schema.json`). Ignored by the filter.
    #[serde(rename = "$schema", default)]
    #[cfg_attr(feature = "schema", schemars(rename = "$schema"))]
    pub json_schema: Option<String>,
    /// Prefix of every shared-data key. Two filter configurations that share
    /// an Envoy `vm_id` must use different instances.
    #[serde(default = "default_instance")]
    #[cfg_attr(feature = "schema", schemars(pattern(NAME_PATTERN)))]
    pub instance: String,
    /// Send RateLimit-* headers on admitted responses (most constrained bound).
    #[serde(default = "default_true")]
    pub success_headers: bool,
    /// Also send the structured `RateLimit-Policy` and `RateLimit` fields of
    /// the IETF httpapi draft (with the `ratelimit` profile).
    #[serde(default)]
    pub structured_headers: bool,
    /// Which quota fields responses carry: `ratelimit` (RateLimit-Limit,
    /// -Remaining, -Reset), `x-ratelimit` (X-RateLimit-*, and
    /// `x-envoy-ratelimited` on a refusal) or `draft` (only the structured
    /// RateLimit-Policy and RateLimit). Retry-After on every refusal.
    #[serde(default)]
    pub header_profile: HeaderProfile,
    /// The gRPC status a gRPC caller (`content-type: application/grpc…`) is
    /// refused with: `resource_exhausted` (default) or `unavailable`.
    #[serde(default)]
    pub grpc_refusal: GrpcRefusal,
    /// Every bound counts and sets headers but never refuses: a dry run.
    #[serde(default)]
    pub shadow: bool,
    /// Shadow bounds may make the response headers (their remaining count
    /// can be the smallest).
    #[serde(default = "default_true")]
    pub shadow_headers: bool,
    /// The share of the refusals every bound without its own
    /// `enforce_percent` carries out, 0 to 100 (100 by default): the
    /// others are let through as a shadow bound's would be.
    #[cfg_attr(feature = "schema", schemars(range(min = 0, max = 100)))]
    pub enforce_percent: Option<u32>,
    /// A request header, sent on to the upstream, naming the bound that
    /// would have refused a request it let through (`<route>/<bound>`): a
    /// shadow bound, or a refusal `enforce_percent` spared. The same mark
    /// is always in the filter state, `wasm.ratebound.would_refuse`, for
    /// access logs.
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub would_refuse_header: Option<String>,
    /// Sign-ins whose account is in the body hold their request headers
    /// until the account is read and counted, so a refused attempt opens
    /// no upstream request. Set it only with `allow_on_headers_stop_iteration:
    /// true` in the Wasm filter's Envoy plugin config (Envoy 1.35 and
    /// later): without that, Envoy gives no body to a filter holding the
    /// headers, and such sign-ins wait until Envoy's timeouts end them.
    #[serde(default)]
    pub hold_sign_in_headers: bool,
    /// How a client address becomes a caller: the network it is counted
    /// under, per family.
    #[serde(default)]
    pub client_address: ClientAddressConfig,
    /// Where caller identities come from (verified sources only).
    pub identity: Option<IdentityConfig>,
    /// The Envoy rate-limit service (envoyproxy/ratelimit over Redis) that
    /// counts bounds of `"scope": "installation"` and reconciles those of
    /// `"scope": "fleet"`.
    pub rate_limit_service: Option<RateLimitServiceConfig>,
    /// Routes in order: a request is counted by the first route that matches
    /// it, and by every bound of that route.
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
}

/// The quota fields of a response (see `Config::header_profile`).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum HeaderProfile {
    #[default]
    #[serde(rename = "ratelimit")]
    RateLimit,
    #[serde(rename = "x-ratelimit")]
    XRateLimit,
    #[serde(rename = "draft")]
    Draft,
}

/// The gRPC status of a refusal of a gRPC caller.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum GrpcRefusal {
    #[default]
    ResourceExhausted,
    Unavailable,
}

fn default_instance() -> String {
    "ratebound".to_string()
}

fn default_true() -> bool {
    true
}

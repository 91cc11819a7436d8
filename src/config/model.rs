//! The serde types of a configuration, as users write it, with the JSON
//! Schema annotations the CLI publishes.

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
pub struct Config {
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

/// How installation bounds reach their counter (one `ShouldRateLimit` call,
/// gRPC, per request that reaches them) and fleet bounds their fleet's
/// counts (calls in the background, every `sync_ms`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RateLimitServiceConfig {
    /// Envoy cluster of the service; it must speak HTTP/2.
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub cluster: String,
    /// The service configuration's `domain` these bounds live in.
    #[cfg_attr(feature = "schema", schemars(pattern(NAME_PATTERN)))]
    pub domain: String,
    /// How long a request waits for the answer, at most.
    #[serde(default = "default_rls_timeout_ms")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 10_000)))]
    pub timeout_ms: u64,
    /// What an unanswered call means: `deny` (503) or `allow`.
    #[serde(default)]
    pub on_error: ServiceOnError,
    /// Fleet bounds: how often each node reconciles its counts with the
    /// service, in the background.
    #[serde(default = "default_sync_ms")]
    #[cfg_attr(feature = "schema", schemars(range(min = 100, max = 5_000)))]
    pub sync_ms: u64,
    /// Fleet bounds: the nodes assumed until the service has counted them
    /// (a node that starts while the service is down decides alone at
    /// `limit / fleet_nodes`).
    // Unset reads as 1, and `check` warns (an Option to tell the two apart).
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "u32", range(min = 1, max = 10_000), extend("default" = 1))
    )]
    pub fleet_nodes: Option<u32>,
    /// The installation's secret for the keys callers are sent to the
    /// service under (keyed hashes: without it anyone who reads Redis can
    /// test a list of names against them). The same on every Envoy.
    pub key_secret: Option<KeySecretConfig>,
}

/// Where the key secret is: exactly one of `env` or `value`.
#[derive(Clone, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct KeySecretConfig {
    /// An environment variable of the Wasm VM that holds it: Envoy's
    /// `vm_config.environment_variables`, Istio's `vmConfig.env` (from the
    /// proxy's own environment, e.g. a Kubernetes Secret).
    #[cfg_attr(feature = "schema", schemars(pattern("^[A-Za-z_][A-Za-z0-9_]*$")))]
    pub env: Option<String>,
    /// The secret itself, at least 16 characters. Prefer `env`: a
    /// configuration is read by more people than a secret should be.
    #[cfg_attr(feature = "schema", schemars(length(min = 16)))]
    pub value: Option<String>,
    /// During a rotation, the other secret (`env` or `value`): each
    /// installation count kept under it is read, never added to, beside
    /// the same caller's count under this one, and the two decide as one,
    /// so Envoys with the old and the new secret keep one count per caller
    /// while a rollout runs (docs/sign-in.md, "Rotating the secret").
    pub also_read: Option<Box<KeySecretConfig>>,
}

impl std::fmt::Debug for KeySecretConfig {
    /// Never the secret itself.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("KeySecretConfig");
        d.field("env", &self.env)
            .field("value", &self.value.as_ref().map(|_| "<redacted>"));
        // Only when given: the configuration's hash of those without it is unchanged.
        if let Some(other) = &self.also_read {
            d.field("also_read", other);
        }
        d.finish()
    }
}

/// A key secret's bytes, resolved (never shown).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// A key secret shorter than this is refused (it could be guessed).
pub const MIN_SECRET_BYTES: usize = 16;

impl RateLimitServiceConfig {
    /// How long a fleet sync's call may take: no request waits for it, so
    /// up to a sync period (a batch of 200 keys can outlast a request's
    /// `timeout_ms` on a loaded service), and never less than `timeout_ms`.
    pub fn sync_timeout_ms(&self) -> u64 {
        self.sync_ms.max(self.timeout_ms)
    }
}

/// What a failed rate-limit service call (unreachable, timeout, error,
/// UNKNOWN) means for the request.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ServiceOnError {
    /// 503 with `Retry-After: 1`: nobody gets past an unchecked sign-in
    /// counter.
    #[default]
    Deny,
    /// Admit, log and count `rls_errors`.
    Allow,
}

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
    /// kept across restarts; fixed windows.
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

/// Where a sign-in request names the account it tries.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AccountSource {
    /// A top-level string field of a JSON body.
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub json: Option<String>,
    /// A field of an `application/x-www-form-urlencoded` body.
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub form: Option<String>,
    /// A request header.
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub header: Option<String>,
    /// At most this much of the body is read (never more buffered); an
    /// account beyond it is not found.
    #[serde(default = "default_max_body_bytes")]
    #[cfg_attr(feature = "schema", schemars(range(min = 64, max = 1_048_576)))]
    pub max_body_bytes: usize,
}

/// How a client address (Envoy's downstream address) becomes a counter key,
/// for per-address bounds and for anonymous callers of identity bounds: the
/// address is masked to its family's prefix and the network is the caller.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ClientAddressConfig {
    /// Leading bits of an IPv4 address that name a caller: 32 (the default)
    /// counts each address. An IPv4-mapped IPv6 address counts as IPv4.
    #[serde(default = "default_ipv4_prefix")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 32)))]
    pub ipv4_prefix: u32,
    /// Leading bits of an IPv6 address that name a caller: 64 (the default),
    /// the network one subscriber usually holds, so an address rotated
    /// inside it is still the same caller; 128 counts each address.
    #[serde(default = "default_ipv6_prefix")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 128)))]
    pub ipv6_prefix: u32,
}

impl Default for ClientAddressConfig {
    fn default() -> Self {
        ClientAddressConfig {
            ipv4_prefix: default_ipv4_prefix(),
            ipv6_prefix: default_ipv6_prefix(),
        }
    }
}

impl ClientAddressConfig {
    /// The prefixes as the request path uses them (validated ranges; out
    /// of range saturates, never panics).
    pub fn prefixes(&self) -> crate::config::plan::Prefixes {
        crate::config::plan::Prefixes {
            ipv4: u8::try_from(self.ipv4_prefix.min(32)).unwrap_or(32),
            ipv6: u8::try_from(self.ipv6_prefix.min(128)).unwrap_or(128),
        }
    }
}

/// The sources of a caller's identity, consulted in this order: JWT,
/// mTLS peer, trusted headers; the session resolve only when none of
/// those named a user or token.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct IdentityConfig {
    pub jwt: Option<JwtSource>,
    pub mtls: Option<MtlsSource>,
    pub header: Option<HeaderSource>,
    pub session: Option<SessionSource>,
}

/// Claims of a token verified by Envoy's `jwt_authn` (`payload_in_metadata`).
/// Claim names may be nested with dots (`realm_access.roles`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct JwtSource {
    /// `payload_in_metadata` of jwt_authn; Istio writes `payload`.
    #[serde(default = "default_payload")]
    pub metadata_key: String,
    #[serde(default = "default_sub")]
    pub user_claim: String,
    pub org_claim: Option<String>,
    /// A list claim, or a space-delimited string such as `scope`.
    pub roles_claim: Option<String>,
    /// The claim identifying the token itself (e.g. `jti`, `client_id`).
    pub token_claim: Option<String>,
    /// The request header jwt_authn takes the token from (its
    /// `from_headers`; a `Bearer ` prefix is skipped). Only used to
    /// remember, per worker, the identity of a token jwt_authn verified.
    #[serde(default = "default_token_header")]
    pub token_header: String,
    /// How long a verified token's identity is remembered (never past the
    /// token's `exp`); 0 reads jwt_authn's metadata on every request.
    #[serde(default = "default_jwt_cache_ttl_s")]
    pub cache_ttl_s: u64,
    #[serde(default = "default_cache_entries")]
    pub cache_entries: usize,
}

/// The mTLS peer: its URI SAN (a SPIFFE id) is the user.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct MtlsSource {
    /// Use the SPIFFE namespace (`/ns/NS/`) as the organisation.
    #[serde(default)]
    pub org_from_namespace: bool,
}

/// Headers set by an earlier, trusted filter. Envoy must strip them from
/// clients; see the README ("Who is the caller?").
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct HeaderSource {
    pub user: Option<String>,
    pub org: Option<String>,
    /// Comma- or space-separated.
    pub roles: Option<String>,
    pub token: Option<String>,
}

/// A call-out to a session service that turns a cookie or Authorization
/// header into an identity. Answers are cached per credential.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SessionSource {
    /// Envoy cluster of the session service.
    pub cluster: String,
    #[serde(default = "default_session_path")]
    pub path: String,
    /// `:authority` of the call; the cluster name by default.
    #[cfg_attr(feature = "schema", schemars(pattern(HOST_PATTERN)))]
    pub authority: Option<String>,
    /// Name of the session cookie to forward.
    #[cfg_attr(feature = "schema", schemars(pattern(COOKIE_PATTERN)))]
    pub cookie: Option<String>,
    /// Forward the Authorization header.
    #[serde(default = "default_true")]
    pub authorization: bool,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default = "default_cache_ttl_s")]
    pub cache_ttl_s: u64,
    #[serde(default = "default_cache_entries")]
    pub cache_entries: usize,
    #[serde(default)]
    pub on_error: OnError,
}

/// What a failed session resolve (timeout, 5xx, bad answer) means.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Treat the caller as anonymous (counted per address), and log.
    #[default]
    Anonymous,
    /// Answer 503: nobody is let through unidentified.
    Deny,
}

/// Who a bound is about: any listed grant matches; no grant means everybody.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Access {
    #[serde(default)]
    pub roles: Vec<String>,
    #[serde(default)]
    pub orgs: Vec<String>,
    #[serde(default)]
    pub authenticated: bool,
    #[serde(default)]
    pub anonymous: bool,
}

impl Access {
    pub fn is_everybody(&self) -> bool {
        self.roles.is_empty() && self.orgs.is_empty() && !self.authenticated && !self.anonymous
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
    /// `installation` (the rate-limit service counts for all of them, fixed
    /// window of `PT1S`, `PT1M`, `PT1H` or `P1D`) or `fleet` (one budget
    /// for all of them, decided on each node from counts synced every
    /// `sync_ms`; sliding window of `PT1S`, `PT1M`, `PT1H` or `P1D`).
    #[serde(default)]
    pub scope: Scope,
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
    crate::config::duration::pattern()
}

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

impl BoundConfig {
    /// True when the bound can only be checked once the caller's identity is
    /// known: it is keyed on one, or narrowed to some callers.
    pub fn needs_identity(&self) -> bool {
        self.per.needs_identity() || !self.applies_to.is_everybody()
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
            Per::Account => "account",
            Per::Model => "model",
        }
    }
}

fn default_sync_ms() -> u64 {
    500
}

fn default_rls_timeout_ms() -> u64 {
    100
}
fn default_max_body_bytes() -> usize {
    16 * 1024
}
fn default_ipv4_prefix() -> u32 {
    32
}
fn default_ipv6_prefix() -> u32 {
    64
}
fn default_instance() -> String {
    "ratebound".to_string()
}
fn default_true() -> bool {
    true
}
fn default_payload() -> String {
    "payload".to_string()
}
fn default_sub() -> String {
    "sub".to_string()
}
fn default_token_header() -> String {
    "authorization".to_string()
}
fn default_jwt_cache_ttl_s() -> u64 {
    60
}
fn default_session_path() -> String {
    "/session".to_string()
}
fn default_timeout_ms() -> u64 {
    200
}
fn default_cache_ttl_s() -> u64 {
    30
}
fn default_cache_entries() -> usize {
    10_000
}

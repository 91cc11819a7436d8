//! Who a caller is, as written: identity sources, the client address's
//! prefixes, a sign-in's account and a bound's `applies_to`.

#[cfg(feature = "schema")]
use super::{COOKIE_PATTERN, HOST_PATTERN};
use serde::Deserialize;

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
    #[serde(default = "super::default_true")]
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
    pub(crate) fn is_everybody(&self) -> bool {
        self.roles.is_empty() && self.orgs.is_empty() && !self.authenticated && !self.anonymous
    }
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

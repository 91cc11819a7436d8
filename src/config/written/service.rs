//! The rate-limit service that counts installation bounds and syncs fleet
//! ones, and the key secret callers are sent to it under.

use super::error::{err, ConfigError};
use super::WrittenConfig;
#[cfg(feature = "schema")]
use super::NAME_PATTERN;
use serde::Deserialize;

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
    pub(crate) fn sync_timeout_ms(&self) -> u64 {
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

/// The key secret a configuration names, resolved where the filter runs:
/// its `value`, or the environment variable `env` read through `getenv`.
/// The same secret must reach every Envoy of the installation, or they
/// count one caller under different keys.
pub(crate) fn resolve_key_secret(
    c: &WrittenConfig,
    getenv: impl Fn(&str) -> Option<String>,
) -> Result<Option<Secret>, ConfigError> {
    let Some(k) = key_secret(c) else {
        return Ok(None);
    };
    resolve(k, "$.rate_limit_service.key_secret", &getenv)
}

fn key_secret(c: &WrittenConfig) -> Option<&KeySecretConfig> {
    c.rate_limit_service.as_ref()?.key_secret.as_ref()
}

/// The other secret of a rotation (`key_secret.also_read`), resolved as
/// [`resolve_key_secret`] resolved the secret (`counted`); refused when it
/// holds the same bytes (every count would be read twice).
pub(crate) fn resolve_also_read(
    c: &WrittenConfig,
    counted: Option<&Secret>,
    getenv: impl Fn(&str) -> Option<String>,
) -> Result<Option<Secret>, ConfigError> {
    let Some(other) = key_secret(c).and_then(|k| k.also_read.as_deref()) else {
        return Ok(None);
    };
    const AT: &str = "$.rate_limit_service.key_secret.also_read";
    let resolved = resolve(other, AT, &getenv)?;
    if resolved.is_some() && resolved.as_ref() == counted {
        return Err(err(
            AT,
            "holds the same secret as key_secret: every count would be read twice; give it \
             the other secret of the rotation",
        ));
    }
    Ok(resolved)
}

fn resolve(
    k: &KeySecretConfig,
    at: &str,
    getenv: &impl Fn(&str) -> Option<String>,
) -> Result<Option<Secret>, ConfigError> {
    if let Some(v) = &k.value {
        return Ok(Some(Secret(v.as_bytes().to_vec())));
    }
    let Some(name) = &k.env else {
        return Ok(None);
    };
    match getenv(name) {
        Some(v) if v.len() >= MIN_SECRET_BYTES => Ok(Some(Secret(v.into_bytes()))),
        found => Err(err(
            format!("{at}.env"),
            format!(
                "the environment variable {name:?} {}: give the Wasm VM the installation's \
                 secret (Envoy: vm_config.environment_variables; Istio: the WasmPlugin's \
                 vmConfig.env), the same on every Envoy",
                match found {
                    Some(v) => format!("holds {} bytes, fewer than {MIN_SECRET_BYTES}", v.len()),
                    None => "is not set in the VM".to_string(),
                }
            ),
        )),
    }
}

fn default_sync_ms() -> u64 {
    500
}

fn default_rls_timeout_ms() -> u64 {
    100
}

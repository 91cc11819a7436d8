//! Every stat the filter defines, once: its name, its kind, what it is
//! counted for (a bound, an installation bound, the instance) and when it
//! exists, and the grammar of the names Envoy shows, both ways.
//!
//! The filter (`node::StatBook`) composes names with this module and
//! `ratebound top` splits them with it; tests/stats_names.rs checks that
//! the Grafana dashboard, the alert rules and the stats tags name only
//! what is here.
//!
//! Names are `ratebound.<instance>.<route>.<bound>.<stat>` per bound and
//! `ratebound.<instance>.<stat>` per instance; Envoy shows them under
//! `wasmcustom.`. Instances, routes and bounds are `[A-Za-z0-9_-]`, so the
//! first segment after the instance is the route, the last the stat, and
//! what is between the bound (an operation's bound is
//! `<operation>.<bound>`). With the stats tags of envoy-demo/stats-tags.yaml,
//! Prometheus shows `ratebound_<stat>` with the labels below. Their number is
//! fixed by the configuration, never by the traffic.

use crate::config::plan::Plan;

/// The first segment of every name the filter defines.
pub const ROOT: &str = "ratebound";
/// What Envoy puts before the names a wasm module defines.
pub const ENVOY_NAMESPACE: &str = "wasmcustom";
/// `wasmcustom.ratebound.`: every ratebound stat in Envoy's /stats starts so.
pub const ENVOY_PREFIX: &str = "wasmcustom.ratebound.";
/// Prometheus names: `ratebound_<stat>` (Envoy drops `wasmcustom`).
pub(crate) const PROMETHEUS_PREFIX: &str = "ratebound_";
/// The labels the stats tags cut out of a name (envoy-demo/stats-tags.yaml).
pub const LABEL_INSTANCE: &str = "ratebound_instance";
pub const LABEL_ROUTE: &str = "ratebound_route";
pub const LABEL_BOUND: &str = "ratebound_bound";
/// In the tags' order.
pub const LABELS: [&str; 3] = [LABEL_INSTANCE, LABEL_ROUTE, LABEL_BOUND];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// What one stat is counted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatScope {
    /// Every bound, node and installation bounds alike.
    Bound,
    /// Node bounds (counted in Envoy's shared data) only.
    NodeBound,
    /// Installation bounds (counted by the rate-limit service) only.
    InstallationBound,
    /// The instance (one per configuration).
    Instance,
}

/// When a stat exists: some only with the parts of a configuration that
/// count them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    Always,
    /// With a rate-limit service (installation bounds).
    Service,
    /// With sign-in routes (a route with an `account`).
    SignIn,
    /// With fleet bounds.
    Fleet,
    /// With cost bounds.
    Cost,
}

impl When {
    pub fn holds(self, plan: &Plan) -> bool {
        match self {
            When::Always => true,
            When::Service => plan.service.is_some(),
            When::SignIn => plan.routes.iter().any(|r| r.account.is_some()),
            When::Fleet => plan.has_fleet_bounds(),
            When::Cost => plan
                .routes
                .iter()
                .any(|r| r.bounds.iter().any(|b| b.cost.is_some())),
        }
    }
}

/// Every stat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stat {
    /// Requests the bound admitted.
    Allowed,
    /// Requests the bound refused.
    Refused,
    /// Requests a shadow bound would have refused.
    WouldRefuse,
    /// Requests of callers past the table's cap, counted together.
    Overflow,
    /// Callers tracked now (of `Table::DEFAULT.cap`).
    Tracked,
    /// Calls to the rate-limit service.
    RlsCalls,
    /// Calls that failed (timeout, unreachable, bad answer).
    RlsErrors,
    /// Shared-data reads or writes Envoy refused.
    StoreErrors,
    /// Callers that could not be identified (a JWT or session that failed).
    IdentityErrors,
    SessionCalls,
    SessionCacheHits,
    JwtCacheHits,
    /// What the worker's memory of its writes saved, and guessed wrong.
    StoreReadsSaved,
    StoreStaleGuesses,
    /// Sign-in requests whose account could not be read.
    AccountsUnreadable,
    /// Locked callers refused without a call.
    RlsCallsSaved,
    /// Answers without a limit: the service's configuration lacks the domain.
    RlsNoLimit,
    /// How long the rate-limit service took to answer.
    RlsLatencyMs,
    FleetSyncCalls,
    /// Keys sent: with the calls, how fast the service takes a sync.
    FleetSyncKeys,
    /// Sync calls that gave no counts.
    FleetSyncErrors,
    /// Decisions made without a fresh fleet count.
    FleetAlone,
    /// Nodes the fleet record last counted.
    FleetNodes,
    /// Requests of cost bounds whose cost never came (charged their
    /// reservation).
    CostsUnknown,
    /// Costs owed to the rate-limit service (an installation bound's
    /// response beyond its reservation) that it did not count.
    CostsUnsent,
    /// Requests of cost bounds refused because their body could not be
    /// read with certainty (not JSON, a field named twice, too large).
    RequestsUnclear,
    /// Streaming requests made to ask for their usage.
    UsageAsked,
}

impl Stat {
    pub const ALL: [Stat; 27] = [
        Stat::Allowed,
        Stat::Refused,
        Stat::WouldRefuse,
        Stat::Overflow,
        Stat::Tracked,
        Stat::RlsCalls,
        Stat::RlsErrors,
        Stat::StoreErrors,
        Stat::IdentityErrors,
        Stat::SessionCalls,
        Stat::SessionCacheHits,
        Stat::JwtCacheHits,
        Stat::StoreReadsSaved,
        Stat::StoreStaleGuesses,
        Stat::AccountsUnreadable,
        Stat::RlsCallsSaved,
        Stat::RlsNoLimit,
        Stat::RlsLatencyMs,
        Stat::FleetSyncCalls,
        Stat::FleetSyncKeys,
        Stat::FleetSyncErrors,
        Stat::FleetAlone,
        Stat::FleetNodes,
        Stat::CostsUnknown,
        Stat::CostsUnsent,
        Stat::RequestsUnclear,
        Stat::UsageAsked,
    ];

    /// The last segment of its name.
    pub const fn name(self) -> &'static str {
        match self {
            Stat::Allowed => "allowed",
            Stat::Refused => "refused",
            Stat::WouldRefuse => "would_refuse",
            Stat::Overflow => "overflow",
            Stat::Tracked => "tracked",
            Stat::RlsCalls => "rls_calls",
            Stat::RlsErrors => "rls_errors",
            Stat::StoreErrors => "store_errors",
            Stat::IdentityErrors => "identity_errors",
            Stat::SessionCalls => "session_calls",
            Stat::SessionCacheHits => "session_cache_hits",
            Stat::JwtCacheHits => "jwt_cache_hits",
            Stat::StoreReadsSaved => "store_reads_saved",
            Stat::StoreStaleGuesses => "store_stale_guesses",
            Stat::AccountsUnreadable => "accounts_unreadable",
            Stat::RlsCallsSaved => "rls_calls_saved",
            Stat::RlsNoLimit => "rls_no_limit",
            Stat::CostsUnknown => "costs_unknown",
            Stat::CostsUnsent => "costs_unsent",
            Stat::RequestsUnclear => "requests_unclear",
            Stat::UsageAsked => "usage_asked",
            Stat::RlsLatencyMs => "rls_latency_ms",
            Stat::FleetSyncCalls => "fleet_sync_calls",
            Stat::FleetSyncKeys => "fleet_sync_keys",
            Stat::FleetSyncErrors => "fleet_sync_errors",
            Stat::FleetAlone => "fleet_alone",
            Stat::FleetNodes => "fleet_nodes",
        }
    }

    pub const fn kind(self) -> Kind {
        match self {
            Stat::Tracked | Stat::FleetNodes => Kind::Gauge,
            Stat::RlsLatencyMs => Kind::Histogram,
            _ => Kind::Counter,
        }
    }

    pub const fn scope(self) -> StatScope {
        match self {
            Stat::Allowed | Stat::Refused | Stat::WouldRefuse => StatScope::Bound,
            Stat::Overflow | Stat::Tracked => StatScope::NodeBound,
            Stat::RlsCalls | Stat::RlsErrors => StatScope::InstallationBound,
            _ => StatScope::Instance,
        }
    }

    /// When it exists (a bound's stats exist with the bound).
    pub const fn when(self) -> When {
        match self {
            Stat::AccountsUnreadable => When::SignIn,
            Stat::CostsUnknown | Stat::CostsUnsent | Stat::RequestsUnclear | Stat::UsageAsked => {
                When::Cost
            }
            Stat::RlsCallsSaved | Stat::RlsNoLimit | Stat::RlsLatencyMs => When::Service,
            Stat::FleetSyncCalls
            | Stat::FleetSyncKeys
            | Stat::FleetSyncErrors
            | Stat::FleetAlone
            | Stat::FleetNodes => When::Fleet,
            _ => When::Always,
        }
    }

    /// How many stats a bound can have: they come first in [`Stat::ALL`],
    /// so a bound's table of stats stops there.
    pub(crate) const PER_BOUND: usize = 7;

    /// Its place in [`Stat::ALL`], for tables indexed by stat.
    pub const fn index(self) -> usize {
        self as usize
    }

    pub fn from_name(name: &str) -> Option<Stat> {
        Stat::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether a node bound (`installation` false) or an installation bound
    /// has it.
    pub const fn per_bound(self, installation: bool) -> bool {
        match self.scope() {
            StatScope::Bound => true,
            StatScope::NodeBound => !installation,
            StatScope::InstallationBound => installation,
            StatScope::Instance => false,
        }
    }

    /// Its Prometheus series (with the stats tags): `ratebound_<stat>`, a
    /// histogram's with `_bucket`, `_count` and `_sum`.
    pub fn prometheus_series(self) -> Vec<String> {
        let base = format!("{PROMETHEUS_PREFIX}{}", self.name());
        match self.kind() {
            Kind::Histogram => ["_bucket", "_count", "_sum"]
                .iter()
                .map(|s| format!("{base}{s}"))
                .collect(),
            Kind::Counter | Kind::Gauge => vec![base],
        }
    }

    /// The stat of a Prometheus series name (see [`Stat::prometheus_series`]).
    pub fn from_prometheus(series: &str) -> Option<Stat> {
        Stat::ALL
            .into_iter()
            .find(|s| s.prometheus_series().iter().any(|n| n == series))
    }
}

/// The stats of one bound, node or installation.
pub(crate) fn bound_stats(installation: bool) -> impl Iterator<Item = Stat> {
    Stat::ALL
        .into_iter()
        .filter(move |s| s.per_bound(installation))
}

/// The instance's stats a configuration has.
pub(crate) fn instance_stats(plan: &Plan) -> impl Iterator<Item = Stat> + '_ {
    Stat::ALL
        .into_iter()
        .filter(|s| s.scope() == StatScope::Instance && s.when().holds(plan))
}

/// `ratebound.<instance>.<route>.<bound>.<stat>`, as the filter defines it.
pub fn bound_name(instance: &str, route: &str, bound: &str, stat: Stat) -> String {
    format!("{ROOT}.{instance}.{route}.{bound}.{}", stat.name())
}

/// `ratebound.<instance>.<stat>`.
pub fn instance_name(instance: &str, stat: Stat) -> String {
    format!("{ROOT}.{instance}.{}", stat.name())
}

/// A name as Envoy shows it: `wasmcustom.<name>`.
pub fn in_envoy(name: &str) -> String {
    format!("{ENVOY_NAMESPACE}.{name}")
}

/// A name split into its parts. The stat is left as written: a name from a
/// newer filter still splits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Name<'a> {
    pub instance: &'a str,
    /// Route and bound (`shop`, `get-item.per_user`); none for the instance's.
    pub bound: Option<(&'a str, &'a str)>,
    pub stat: &'a str,
}

/// Splits a name, with or without Envoy's `wasmcustom.`; none for a name
/// that is not ratebound's.
pub fn split(name: &str) -> Option<Name<'_>> {
    let bare = name
        .strip_prefix(ENVOY_NAMESPACE)
        .and_then(|n| n.strip_prefix('.'))
        .unwrap_or(name);
    let rest = bare.strip_prefix(ROOT)?.strip_prefix('.')?;
    let (instance, rest) = rest.split_once('.')?;
    let (rest, stat) = match rest.rsplit_once('.') {
        None => {
            return (!instance.is_empty() && !rest.is_empty()).then_some(Name {
                instance,
                bound: None,
                stat: rest,
            })
        }
        Some(parts) => parts,
    };
    let (route, bound) = rest.split_once('.')?;
    let parts = [instance, route, stat];
    (parts.iter().all(|p| !p.is_empty()) && bound.split('.').all(|p| !p.is_empty())).then_some(
        Name {
            instance,
            bound: Some((route, bound)),
            stat,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found_back() {
        for (i, s) in Stat::ALL.into_iter().enumerate() {
            assert_eq!(s.index(), i, "ALL is in declaration order");
            assert_eq!(Stat::from_name(s.name()), Some(s));
            assert!(s
                .name()
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b == b'_'));
            for series in s.prometheus_series() {
                assert_eq!(Stat::from_prometheus(&series), Some(s), "{series}");
            }
        }
        for (i, s) in Stat::ALL.into_iter().enumerate() {
            assert_eq!(
                i < Stat::PER_BOUND,
                s.scope() != StatScope::Instance,
                "{s:?}"
            );
        }
        assert_eq!(Stat::from_name("nope"), None);
        // A histogram has no bare series; a counter no suffixed one.
        assert_eq!(Stat::from_prometheus("ratebound_rls_latency_ms"), None);
        assert_eq!(Stat::from_prometheus("ratebound_refused_count"), None);
        assert_eq!(ENVOY_PREFIX, format!("{ENVOY_NAMESPACE}.{ROOT}."));
        assert_eq!(PROMETHEUS_PREFIX, format!("{ROOT}_"));
    }

    #[test]
    fn node_and_installation_bounds_have_their_own_stats() {
        let node: Vec<_> = bound_stats(false).map(Stat::name).collect();
        let inst: Vec<_> = bound_stats(true).map(Stat::name).collect();
        assert_eq!(
            node,
            ["allowed", "refused", "would_refuse", "overflow", "tracked"]
        );
        assert_eq!(
            inst,
            [
                "allowed",
                "refused",
                "would_refuse",
                "rls_calls",
                "rls_errors"
            ]
        );
    }

    #[test]
    fn composed_names_split_back() {
        let n = in_envoy(&bound_name(
            "shop",
            "api",
            "payOrder.addr",
            Stat::WouldRefuse,
        ));
        assert_eq!(
            n,
            "wasmcustom.ratebound.shop.api.payOrder.addr.would_refuse"
        );
        assert_eq!(
            split(&n),
            Some(Name {
                instance: "shop",
                bound: Some(("api", "payOrder.addr")),
                stat: "would_refuse"
            })
        );
        let n = instance_name("my-shop", Stat::RlsLatencyMs);
        assert_eq!(n, "ratebound.my-shop.rls_latency_ms");
        assert_eq!(
            split(&n),
            Some(Name {
                instance: "my-shop",
                bound: None,
                stat: "rls_latency_ms"
            })
        );
        assert_eq!(
            split("ratebound.shop.api.per_address.tracked")
                .and_then(|n| n.bound)
                .map(|(_, b)| b),
            Some("per_address")
        );
    }

    #[test]
    fn what_is_not_a_ratebound_name_does_not_split() {
        for n in [
            "wasmcustom.other.shop.store_errors",
            "ratebound.shop",
            "ratebound.shop.api.refused", // a route without a bound
            "ratebound..store_errors",
            "ratebound.shop.api..refused",
            "ratebound.shop.api.x..y.refused",
            "ratebound.shop.api.per_address.",
            "wasmcustom.ratebound",
            "xratebound.shop.store_errors",
        ] {
            assert_eq!(split(n), None, "{n}");
        }
    }
}

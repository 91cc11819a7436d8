//! The compiled, immutable form of a configuration: the one model both the
//! request path (route matchers, bounds with their rates, fingerprints that
//! say whether a route changed between two configurations) and the console
//! (warnings, `explain`) read. A configuration is compiled once; what was
//! written that only the console needs (JSON paths, names, windows as
//! written, the match as written) is kept beside what the request path reads.
//!
//! - [`compile`](Plan::compile): the configuration to the plan;
//! - [`matcher`]: a route's `match` and the request it is compared with;
//! - [`table`]: one value per bound (a lane, stat slots, a refusal's place);
//! - [`fingerprint`]: what says a bound's counts carry over;
//! - [`cost`]: a bound's cost; [`ids`]: handles into the plan;
//! - [`tiers`]: which bounds share a lane, and why others do not.

pub mod account;
mod compile;
pub mod cost;
mod fingerprint;
mod ids;
mod matcher;
mod table;
#[cfg(test)]
mod tests;
mod tiers;

pub use cost::{Cost, CostSource, Prices};
pub use ids::{BoundId, OpId, RouteId};
pub use matcher::{Matcher, Normalized, RequestInfo};
pub use table::BoundTable;
pub use tiers::{alone, Alone};

use crate::config::operations::OpTree;
use crate::config::{
    Access, AccountSource, IdentityConfig, MatchConfig, Per, RateLimitServiceConfig, Scope, Secret,
    Shape, Unit,
};
use crate::count::window::Rate;
use std::ops::Range;

/// How many leading bits of an address name its caller, per family
/// (validated: IPv4 1–32, IPv6 1–128).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Prefixes {
    pub ipv4: u8,
    pub ipv6: u8,
}

impl Default for Prefixes {
    fn default() -> Self {
        Prefixes { ipv4: 32, ipv6: 64 }
    }
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub instance: String,
    pub success_headers: bool,
    /// The quota fields responses carry.
    pub style: crate::reply::Style,
    /// The gRPC status a gRPC caller is refused with.
    pub grpc_refusal: u32,
    pub shadow_headers: bool,
    /// The request header naming the bound that would have refused.
    pub would_refuse_header: Option<String>,
    /// Its other spellings servers read as it (`account::header_spellings`),
    /// spelled out once: a client's copy of any is removed.
    pub would_refuse_spellings: Vec<String>,
    /// Sign-ins read from the body hold their headers until decided.
    pub hold_sign_in_headers: bool,
    pub routes: Vec<Route>,
    /// Which request attributes any matcher reads, so the host reads only those.
    pub needs: Needs,
    pub identity: Option<IdentityConfig>,
    /// The network a client address is counted under, per family.
    pub client_address: Prefixes,
    /// Where installation bounds are counted.
    pub service: Option<RateLimitServiceConfig>,
    /// The key secret, when the configuration gives its value (the host
    /// resolves one named by `env`: [`crate::config::resolve_key_secret`]).
    pub key_secret: Option<Secret>,
    /// During a rotation, the other secret, whose counts are read beside
    /// (`key_secret.also_read`; resolved like `key_secret`).
    pub also_key_secret: Option<Secret>,
    /// Changes whenever anything in the configuration changes.
    pub hash: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    pub route_name: bool,
    pub host: bool,
    pub path: bool,
    pub method: bool,
}

#[derive(Debug, Clone)]
pub struct Route {
    /// Its position in `routes`, as written and in the plan.
    pub index: usize,
    pub name: String,
    pub matcher: Matcher,
    /// The `match` as written (the console words it and compares operations
    /// against it; `matcher` is its normalised form).
    pub matching: MatchConfig,
    /// Every bound, whatever its scope: the route's own as written, then
    /// each operation's (a bound's position here is its [`BoundId`]).
    pub bounds: Vec<Bound>,
    /// Bounds counted in shared data that need no identity, checked first:
    /// before any identity is resolved, before the body, before the
    /// upstream.
    pub early: Vec<BoundId>,
    /// Bounds counted in shared data keyed on or narrowed by identity,
    /// checked once it is known.
    pub late: Vec<BoundId>,
    /// Some bound is keyed on the client address (fallbacks included).
    pub needs_address: bool,
    /// Operations with bounds of their own (theirs follow the route's in
    /// `bounds`, operation by operation), and the tree that finds a
    /// request's operation.
    pub operations: Vec<Operation>,
    pub op_tree: Option<OpTree>,
    /// Bounds counted by the rate-limit service (the route's and its
    /// operations'), checked last: after every node bound admitted the
    /// request.
    pub service_bounds: Vec<BoundId>,
    /// Bounds whose cost the request names in a header (read before the
    /// first phase).
    pub named_costs: Vec<BoundId>,
    /// A bound reads its cost in the response body: the route's requests
    /// ask for an answer that is not compressed (a caller asking for gzip
    /// would otherwise be charged only its reservations).
    pub plain_answers: bool,
    /// A bound reads the request body before admission (`Cost::reads_request`):
    /// at most this many bytes of it.
    pub reads_request: Option<usize>,
    /// A bound asks streams for their usage (`ask_usage`): its pointer, by
    /// which the usage event a caller did not ask for is known.
    pub asks_usage: Option<String>,
    /// Where requests name the account they try (`per: account`).
    pub account: Option<AccountSource>,
    /// An account carried in a header: its name, then the other spellings
    /// servers read as it (`account::header_spellings`), spelled out once
    /// here rather than for every sign-in.
    pub account_headers: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Operation {
    /// Its position in the route's `operations`.
    pub index: usize,
    /// Its stat name ([`operation_name`]): the `<operation>` of
    /// `<operation>.<bound>`.
    pub name: String,
    pub method: String,
    /// The path template as written.
    pub path: String,
    pub operation_id: Option<String>,
    /// Its bounds in the route's `bounds`.
    pub bounds: Range<usize>,
    /// What a request to it is checked against by phase: the route's
    /// `early` (`late`), then its own, built once here so that no request
    /// joins the two.
    pub early: Vec<BoundId>,
    pub late: Vec<BoundId>,
}

impl Route {
    pub fn bound(&self, id: BoundId) -> Option<&Bound> {
        self.bounds.get(id.0)
    }

    pub fn operation(&self, id: OpId) -> Option<&Operation> {
        self.operations.get(id.0)
    }

    /// The bounds sharing the lane `b` is counted in, in their order, `b`
    /// among them ([`Tier`]); empty for a bound with a lane of its own.
    pub fn lane_of<'a>(&'a self, b: &'a Bound) -> Vec<&'a Bound> {
        let lead = match &b.tier {
            Tier::Own => return Vec::new(),
            Tier::Leads(_) => Some(b),
            Tier::Joins { lead, .. } => self.bound(*lead),
        };
        match lead.map(|l| &l.tier) {
            Some(Tier::Leads(tiers)) => {
                tiers.iter().filter_map(|(id, _)| self.bound(*id)).collect()
            }
            _ => Vec::new(),
        }
    }

    /// Every bound with its handle.
    pub(crate) fn bounds_with_ids(&self) -> impl Iterator<Item = (BoundId, &Bound)> {
        self.bounds.iter().enumerate().map(|(i, b)| (BoundId(i), b))
    }

    /// The route's own bounds (its operations' follow them in `bounds`).
    pub(crate) fn own_bounds(&self) -> &[Bound] {
        let own = self
            .operations
            .first()
            .map_or(self.bounds.len(), |o| o.bounds.start);
        self.bounds.get(..own).unwrap_or_default()
    }

    /// The bounds of operation `op`.
    pub fn operation_bounds(&self, op: &Operation) -> &[Bound] {
        self.bounds.get(op.bounds.clone()).unwrap_or_default()
    }

    /// The shared-data bounds a request to operation `op` is checked
    /// against before identity: the route's, then the operation's.
    pub fn early_bounds(&self, op: Option<OpId>) -> &[BoundId] {
        op.and_then(|o| self.operation(o))
            .map_or(&self.early, |o| &o.early)
    }

    /// Some bound of the route, or of operation `op`, needs an identity.
    pub fn needs_identity(&self, op: Option<OpId>) -> bool {
        !self.late_bounds(op).is_empty()
            || self
                .installation_bounds(op)
                .any(|(_, b)| b.needs_identity())
    }

    /// Shared-data bounds that need identity (before `applies_to` narrows
    /// them): the route's, then the operation's.
    pub(crate) fn late_bounds(&self, op: Option<OpId>) -> &[BoundId] {
        op.and_then(|o| self.operation(o))
            .map_or(&self.late, |o| &o.late)
    }

    /// Every installation bound: the route's, then its operations'.
    pub fn installation_bounds_all(&self) -> impl Iterator<Item = &Bound> {
        self.service_bounds.iter().filter_map(|&id| self.bound(id))
    }

    /// The installation bounds a request to operation `op` is counted by
    /// (before `applies_to` narrows them).
    pub(crate) fn installation_bounds(
        &self,
        op: Option<OpId>,
    ) -> impl Iterator<Item = (BoundId, &Bound)> {
        self.service_bounds
            .iter()
            .filter_map(|&id| Some((id, self.bound(id)?)))
            .filter(move |(_, b)| {
                b.written.operation.is_none() || b.written.operation == op.map(OpId::index)
            })
    }

    /// The operation a request is, when the route lists operations: under
    /// either reading of its path.
    pub(crate) fn operation_for(&self, r: &Normalized) -> Option<OpId> {
        let tree = self.op_tree.as_ref()?;
        let method = r.method?;
        r.paths().find_map(|p| tree.find(method, p)).map(OpId)
    }
}

#[derive(Debug, Clone)]
pub struct Bound {
    /// As refusals and stats name it: the bound's own name, or
    /// `<operation>.<bound>` for an operation's ([`qualified_name`]).
    pub name: String,
    pub per: Per,
    pub applies_to: Access,
    /// Its limit and window (an installation bound's window is its unit's).
    pub rate: Rate,
    /// Counts, never refuses.
    pub shadow: bool,
    /// The share of its refusals carried out (100 but during a rollout);
    /// the others are spared as a shadow bound's are.
    pub enforce_percent: u8,
    /// What a request counts, when not 1.
    pub cost: Option<Cost>,
    /// Identity of this bound in this route as compiled: any change to the
    /// route's matching or to any of its bounds gives every bound of the
    /// route a new fingerprint, so its counters start again.
    pub fingerprint: u64,
    /// Where it is counted.
    pub scope: BoundScope,
    /// Where and how it was written, for the console.
    pub written: Written,
    /// Whether it keeps its windows in one entry with the route's other
    /// bounds on the same key ([`Tier`]).
    pub tier: Tier,
}

/// How a node bound shares its lane with the other bounds of its route
/// keyed on the same caller (tiers: "10 a second, 300 a minute"). Bounds
/// share one lane, hence one entry per caller, one read and one
/// compare-and-swap, when each is a node bound counting requests (no
/// cost), enforced in full (not shadow, `enforce_percent` 100), of the
/// same `per`, `applies_to` and operation (or none); at most
/// [`crate::count::lane::MAX_TIERS`] in a lane, in the route's order. Any
/// other bound keeps a lane of its own. A bound that starts or stops
/// sharing takes a new fingerprint (its count restarts once). The rule is
/// [`Bound::barrier`] and [`alone`] (`tiers.rs`), which the reading words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Tier {
    /// Its own lane.
    #[default]
    Own,
    /// It leads a shared lane: its tiers (itself first), in order, with
    /// their rates.
    Leads(Vec<(BoundId, Rate)>),
    /// Counted in the lane bound `lead` leads, as its tier `index`.
    Joins { lead: BoundId, index: usize },
}

/// Where a compiled bound is counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BoundScope {
    /// In this Envoy's shared data.
    Node,
    /// In this Envoy's shared data, against the fleet's count, synced with
    /// the rate-limit service under the `bound` descriptor value
    /// `<route>.<name>`.
    Fleet { descriptor: String },
    /// By the rate-limit service, under the `bound` descriptor value
    /// `<route>.<name>`, in its clock windows of `unit`: two of them
    /// weighed (sliding) or the current one alone (fixed).
    Installation {
        descriptor: String,
        unit: Unit,
        shape: Shape,
    },
}

impl BoundScope {
    /// Which of the three scopes, without what the compiled one carries.
    pub fn kind(&self) -> Scope {
        match self {
            BoundScope::Node => Scope::Node,
            BoundScope::Fleet { .. } => Scope::Fleet,
            BoundScope::Installation { .. } => Scope::Installation,
        }
    }
}

impl Bound {
    /// Keyed on, or narrowed by, who the caller is.
    pub fn needs_identity(&self) -> bool {
        crate::config::needs_identity(self.per, &self.applies_to)
    }

    /// Counted in a lane of its own or as the first of its tiers: the
    /// bound that asks the directory for a lane.
    pub fn has_lane(&self) -> bool {
        self.in_shared_data() && !matches!(self.tier, Tier::Joins { .. })
    }

    /// Counted in this Envoy's shared data (a node or a fleet bound): it
    /// has a lane, or shares one ([`Tier`]).
    pub fn in_shared_data(&self) -> bool {
        self.scope.kind().in_shared_data()
    }

    /// A fleet bound's descriptor value.
    pub fn fleet(&self) -> Option<&str> {
        match &self.scope {
            BoundScope::Fleet { descriptor } => Some(descriptor),
            _ => None,
        }
    }

    /// An installation bound's descriptor value, window and shape.
    pub fn installation(&self) -> Option<(&str, Unit, Shape)> {
        match &self.scope {
            BoundScope::Installation {
                descriptor,
                unit,
                shape,
            } => Some((descriptor, *unit, *shape)),
            _ => None,
        }
    }

    /// What an installation bound's number means, said where it is typed
    /// (`check`, `explain`).
    pub(crate) fn service_reading(cluster: &str, shape: Shape) -> String {
        let how = match shape {
            Shape::Sliding => {
                "sliding window (the two-window estimate over the service's counts of two windows): \
                 never 2× the limit at a window edge, up to about 2× − 1 spread over a whole \
                 window by a caller who times it"
            }
            Shape::Fixed => "fixed window: up to 2× the limit around a window edge",
        };
        format!("exact for the whole installation (rate-limit service `{cluster}`, Redis); {how}")
    }
}

/// A bound as written: what the console says about it beyond its rate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    /// `$.routes[i].bounds[j]`, or `$.routes[i].operations[k].bounds[j]`.
    pub path: String,
    /// The operation (its index in the route's `operations`) whose bound it is.
    pub operation: Option<usize>,
    /// Its position among the route's, or the operation's, bounds.
    pub index: usize,
    /// Its own name ([`bound_name`]), without the operation's.
    pub name: String,
    /// The window as written (`PT1M`); `rate.window_ms` is its one value.
    pub window: String,
}

/// The name of an operation's bound in refusals and stats.
pub(crate) fn qualified_name(operation: &str, bound: &str) -> String {
    format!("{operation}.{bound}")
}

impl Plan {
    /// The first route whose matcher accepts the request.
    pub fn route_for(&self, r: &RequestInfo) -> Option<RouteId> {
        self.route_for_normalized(&r.normalized())
    }

    /// [`Plan::route_for`] of a request already normalised (the request
    /// path normalises once, for the route and its operation).
    pub(crate) fn route_for_normalized(&self, r: &Normalized) -> Option<RouteId> {
        self.routes
            .iter()
            .position(|route| route.matcher.matches(r))
            .map(RouteId)
    }

    pub fn route(&self, id: RouteId) -> Option<&Route> {
        self.routes.get(id.0)
    }

    /// Every route with its handle.
    pub(crate) fn routes_with_ids(&self) -> impl Iterator<Item = (RouteId, &Route)> {
        self.routes.iter().enumerate().map(|(i, r)| (RouteId(i), r))
    }

    /// Some bound is a fleet bound: the configuration syncs.
    pub(crate) fn has_fleet_bounds(&self) -> bool {
        self.routes
            .iter()
            .any(|r| r.bounds.iter().any(|b| b.fleet().is_some()))
    }

    /// What every shared-data bound with a lane of its own or leading its
    /// tiers' ([`Bound::has_lane`]), in plan order, asks of the lane
    /// directory.
    pub fn wants(&self) -> Vec<crate::count::directory::Want> {
        self.routes
            .iter()
            .flat_map(|r| r.bounds.iter())
            .filter(|b| b.has_lane())
            .map(|b| crate::count::directory::Want {
                fingerprint: b.fingerprint,
                table: b.per != Per::Route,
            })
            .collect()
    }
}

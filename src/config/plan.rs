//! The compiled, immutable form of a configuration: the one model both the
//! request path (route matchers, bounds with their rates, fingerprints that
//! say whether a route changed between two configurations) and the console
//! (warnings, `explain`) read. A configuration is compiled once; what was
//! written that only the console needs (JSON paths, names, windows as
//! written, the match as written) is kept beside what the request path reads.

use crate::config::installation::Unit;
use crate::config::normalize;
use crate::config::operations::{parse_template, OpTree};
use crate::config::{
    bound_name, operation_name, window_ms, Access, AccountSource, BoundConfig, Config,
    IdentityConfig, MatchConfig, Per, RateLimitServiceConfig, RouteConfig, Scope,
};
use crate::config::{GrpcRefusal, HeaderProfile};
use crate::count::window::Rate;
use crate::reply::Style;
use siphasher::sip::SipHasher13;
use std::borrow::Cow;
use std::hash::{Hash, Hasher};
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
    /// resolves one named by `env`: [`crate::config::installation::resolve_key_secret`]).
    pub key_secret: Option<crate::config::Secret>,
    /// During a rotation, the other secret, whose counts are read beside
    /// (`key_secret.also_read`; resolved like `key_secret`).
    pub also_key_secret: Option<crate::config::Secret>,
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

/// A route, by its position in the plan's `routes`: what a request holds
/// across its callbacks instead of a borrow of the plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RouteId(pub usize);

/// A bound, by its position in its route's `bounds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BoundId(pub usize);

/// An operation, by its position in its route's `operations`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub usize);

impl RouteId {
    pub fn index(self) -> usize {
        self.0
    }
}

impl BoundId {
    pub fn index(self) -> usize {
        self.0
    }
}

impl OpId {
    pub fn index(self) -> usize {
        self.0
    }
}

impl Route {
    pub fn bound(&self, id: BoundId) -> Option<&Bound> {
        self.bounds.get(id.0)
    }

    pub fn operation(&self, id: OpId) -> Option<&Operation> {
        self.operations.get(id.0)
    }

    /// Every bound with its handle.
    pub fn bounds_with_ids(&self) -> impl Iterator<Item = (BoundId, &Bound)> {
        self.bounds.iter().enumerate().map(|(i, b)| (BoundId(i), b))
    }

    /// The route's own bounds (its operations' follow them in `bounds`).
    pub fn own_bounds(&self) -> &[Bound] {
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
    pub fn late_bounds(&self, op: Option<OpId>) -> &[BoundId] {
        op.and_then(|o| self.operation(o))
            .map_or(&self.late, |o| &o.late)
    }

    /// Every installation bound: the route's, then its operations'.
    pub fn installation_bounds_all(&self) -> impl Iterator<Item = &Bound> {
        self.service_bounds.iter().filter_map(|&id| self.bound(id))
    }

    /// The installation bounds a request to operation `op` is counted by
    /// (before `applies_to` narrows them).
    pub fn installation_bounds(&self, op: Option<OpId>) -> impl Iterator<Item = (BoundId, &Bound)> {
        self.service_bounds
            .iter()
            .filter_map(|&id| Some((id, self.bound(id)?)))
            .filter(move |(_, b)| {
                b.written.operation.is_none() || b.written.operation == op.map(OpId::index)
            })
    }

    /// The operation a request is, when the route lists operations: under
    /// either reading of its path.
    pub fn operation_for(&self, r: &Normalized) -> Option<OpId> {
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
    pub cost: Option<crate::config::cost::Cost>,
    /// Identity of this bound in this route as compiled: any change to the
    /// route's matching or to any of its bounds gives every bound of the
    /// route a new fingerprint, so its counters start again.
    pub fingerprint: u64,
    /// Where it is counted.
    pub scope: BoundScope,
    /// Where and how it was written, for the console.
    pub written: Written,
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
    /// `<route>.<name>`, in its clock windows of `unit`.
    Installation { descriptor: String, unit: Unit },
}

impl BoundScope {
    /// Which of the three scopes, without what the compiled one carries.
    pub fn kind(&self) -> crate::config::Scope {
        match self {
            BoundScope::Node => crate::config::Scope::Node,
            BoundScope::Fleet { .. } => crate::config::Scope::Fleet,
            BoundScope::Installation { .. } => crate::config::Scope::Installation,
        }
    }
}

impl Bound {
    /// Keyed on, or narrowed by, who the caller is.
    pub fn needs_identity(&self) -> bool {
        self.per.needs_identity() || !self.applies_to.is_everybody()
    }

    /// Counted in this Envoy's shared data (a node or a fleet bound): it
    /// has a lane.
    pub fn in_shared_data(&self) -> bool {
        !matches!(self.scope, BoundScope::Installation { .. })
    }

    /// A fleet bound's descriptor value.
    pub fn fleet(&self) -> Option<&str> {
        match &self.scope {
            BoundScope::Fleet { descriptor } => Some(descriptor),
            _ => None,
        }
    }

    /// An installation bound's descriptor value and window.
    pub fn installation(&self) -> Option<(&str, Unit)> {
        match &self.scope {
            BoundScope::Installation { descriptor, unit } => Some((descriptor, *unit)),
            _ => None,
        }
    }

    /// What an installation bound's number means, said where it is typed
    /// (`check`, `explain`).
    pub fn service_reading(cluster: &str) -> String {
        format!(
            "exact for the whole installation (rate-limit service `{cluster}`, Redis); fixed \
             window: up to 2× the limit around a window edge"
        )
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
pub fn qualified_name(operation: &str, bound: &str) -> String {
    format!("{operation}.{bound}")
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Matcher {
    route_name: Option<String>,
    host: Option<HostMatch>,
    /// Normalised as request paths are ([`normalize::path`]).
    path_prefix: Option<String>,
    methods: Vec<String>,
}

/// A configured `host`, normalised as authorities are.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostMatch {
    name: String,
    port: Option<u16>,
}

impl HostMatch {
    fn new(configured: &str) -> HostMatch {
        let h = normalize::host(configured);
        HostMatch {
            name: h.name.into_owned(),
            port: h.port,
        }
    }

    /// A host written without a port matches the authority on any port; with
    /// a port, that port, or no port when it is a default one (80, 443): a
    /// client leaves the default port out, and the scheme is not read.
    fn matches(&self, authority: &normalize::Authority) -> bool {
        self.name == authority.name
            && match (self.port, authority.port) {
                (None, _) => true,
                (Some(want), Some(got)) => want == got,
                (Some(want), None) => want == 80 || want == 443,
            }
    }
}

/// The request attributes a matcher may look at, as Envoy hands them over.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestInfo<'a> {
    pub route_name: Option<&'a str>,
    pub host: Option<&'a str>,
    /// The path, with or without its query string.
    pub path: Option<&'a str>,
    pub method: Option<&'a str>,
}

/// A request normalised once ([`RequestInfo::normalized`]): what matchers
/// and operations compare. Already-normal values are borrowed.
#[derive(Debug, Clone, Default)]
pub struct Normalized<'a> {
    route_name: Option<&'a str>,
    host: Option<normalize::Authority<'a>>,
    path: Option<Cow<'a, str>>,
    /// The reading that keeps an encoded slash inside its segment, when the
    /// path holds one ([`normalize::path_keeping_encoded_slashes`]).
    path_kept: Option<Cow<'a, str>>,
    method: Option<&'a str>,
}

impl<'a> RequestInfo<'a> {
    pub fn normalized(&self) -> Normalized<'a> {
        Normalized {
            route_name: self.route_name,
            host: self.host.map(normalize::host),
            path: self.path.map(normalize::path),
            path_kept: self.path.and_then(normalize::path_keeping_encoded_slashes),
            method: self.method,
        }
    }
}

impl Normalized<'_> {
    /// The readings of the path: a matcher accepts the request if it
    /// accepts either.
    fn paths(&self) -> impl Iterator<Item = &str> {
        self.path.iter().chain(&self.path_kept).map(|p| p.as_ref())
    }
}

impl Matcher {
    fn new(m: &MatchConfig) -> Matcher {
        Matcher {
            route_name: m.route_name.clone(),
            host: m.host.as_deref().map(HostMatch::new),
            path_prefix: m
                .path_prefix
                .as_deref()
                .map(|p| normalize::path(p).into_owned()),
            methods: m.methods.clone(),
        }
    }

    fn takes_method(&self, method: &str) -> bool {
        self.methods.is_empty()
            || self
                .methods
                .iter()
                .any(|m| normalize::method_matches(m, method))
    }

    /// True when every request `other` matches, this matches too (so a
    /// route with `other` after a route with `self` never sees a request).
    /// Conservative: false whenever it cannot be shown from the two alone.
    pub fn covers(&self, other: &Matcher) -> bool {
        let route_name = match (&self.route_name, &other.route_name) {
            (None, _) => true,
            (Some(a), Some(b)) => a == b,
            (Some(_), None) => false,
        };
        let host = match (&self.host, &other.host) {
            (None, _) => true,
            // Every authority `b` accepts is `b`'s name on `b`'s port (or
            // on any port, or none); `a` takes all of them when it has the
            // same name and no port or the same one.
            (Some(a), Some(b)) => a.name == b.name && (a.port.is_none() || a.port == b.port),
            (Some(_), None) => false,
        };
        let path = match (&self.path_prefix, &other.path_prefix) {
            (None, _) => true,
            (Some(a), Some(b)) => b.starts_with(a.as_str()),
            (Some(_), None) => false,
        };
        // HEAD is taken wherever GET is: `other` takes its own methods, and
        // HEAD if it has GET.
        let methods = self.methods.is_empty()
            || (!other.methods.is_empty()
                && other.methods.iter().all(|m| self.takes_method(m))
                && (!other.takes_method("HEAD") || self.takes_method("HEAD")));
        route_name && host && path && methods
    }

    pub fn matches(&self, r: &Normalized) -> bool {
        if let Some(want) = &self.route_name {
            if r.route_name != Some(want.as_str()) {
                return false;
            }
        }
        if let Some(want) = &self.host {
            if !r.host.as_ref().is_some_and(|h| want.matches(h)) {
                return false;
            }
        }
        if let Some(prefix) = &self.path_prefix {
            if !r.paths().any(|p| p.starts_with(prefix.as_str())) {
                return false;
            }
        }
        if !self.methods.is_empty() && !r.method.is_some_and(|m| self.takes_method(m)) {
            return false;
        }
        true
    }
}

/// Fixed keys: fingerprints must agree across workers, VMs and restarts.
fn stable_hash(value: &impl Hash) -> u64 {
    let mut h = SipHasher13::new_with_keys(0x7261_7465_626f_756e, 0x642d_6670_2d76_3031);
    value.hash(&mut h);
    h.finish()
}

/// What identifies a bound in a fingerprint.
fn bound_key(b: &BoundConfig, j: usize, all_shadow: bool) -> impl Hash + '_ {
    (
        bound_name(b, j),
        b.per,
        &b.applies_to,
        b.limit,
        b.window.clone(),
        b.shadow || all_shadow,
    )
}

/// A bound of route `route` (of its operation `op`, named `op_name`) at
/// `index` in its list; `slot` numbers the route's shared-data bounds, as
/// its fingerprint has always counted them.
struct At<'a> {
    route: usize,
    op: Option<(usize, &'a str)>,
    index: usize,
    slot: usize,
}

fn compile_bound(b: &BoundConfig, route: &str, at: At, route_fp: u64, c: &Config) -> Bound {
    let all_shadow = c.shadow;
    let own = bound_name(b, at.index);
    let (name, path) = match at.op {
        None => (
            own.clone(),
            format!("$.routes[{}].bounds[{}]", at.route, at.index),
        ),
        Some((k, op_name)) => (
            qualified_name(op_name, &own),
            format!(
                "$.routes[{}].operations[{k}].bounds[{}]",
                at.route, at.index
            ),
        ),
    };
    // The one conversion of a window to milliseconds. Validated: the
    // fallback (a minute) is never reached.
    let window_ms = window_ms(&b.window).unwrap_or(60_000);
    let descriptor = format!("{route}.{name}");
    let cost = b
        .cost
        .as_ref()
        .and_then(|c| crate::config::cost::Cost::compile(c, b.limit));
    let scope = match b.scope {
        Scope::Node => BoundScope::Node,
        Scope::Fleet => BoundScope::Fleet { descriptor },
        Scope::Installation => BoundScope::Installation {
            descriptor,
            // Validated: one of the service's units.
            unit: Unit::of_ms(window_ms).unwrap_or(Unit::Minute),
        },
    };
    Bound {
        name,
        per: b.per,
        applies_to: b.applies_to.clone(),
        shadow: b.shadow || all_shadow,
        // Validated: at most 100. Not in the fingerprint: a rollout's
        // steps keep the counts.
        enforce_percent: b
            .enforce_percent
            .or(c.enforce_percent)
            .map_or(100, |p| p.min(100) as u8),
        rate: Rate {
            limit: u32::try_from(b.limit).unwrap_or(u32::MAX),
            window_ms,
        },
        // A fleet bound's entries are not a node bound's: the same bound
        // turned fleet (or back) must not read the other's counters. Salted
        // rather than hashed with the scope, so that no node bound's
        // fingerprint (and count) changes with this release.
        fingerprint: stable_hash(&(route_fp, at.slot))
            ^ if b.scope == Scope::Fleet {
                FLEET_SALT
            } else {
                0
            }
            // A count of units is not a count of requests: a bound given a
            // cost (or another one) starts again. Salted, as the fleet's.
            ^ cost.as_ref().map_or(0, stable_hash),
        cost,
        scope,
        written: Written {
            path,
            operation: at.op.map(|(k, _)| k),
            index: at.index,
            name: own,
            window: b.window.clone(),
        },
    }
}

/// See [`compile_bound`].
const FLEET_SALT: u64 = 0x666c_6565_7400_0001;

fn route_fingerprint(r: &RouteConfig, all_shadow: bool) -> u64 {
    let m = &r.matching;
    let bounds: Vec<_> = r
        .bounds
        .iter()
        .enumerate()
        .map(|(j, b)| bound_key(b, j, all_shadow))
        .collect();
    let operations: Vec<_> = r
        .operations
        .iter()
        .map(|o| {
            let bounds: Vec<_> = o
                .bounds
                .iter()
                .enumerate()
                .map(|(j, b)| bound_key(b, j, all_shadow))
                .collect();
            (&o.name, &o.operation_id, &o.method, &o.path, bounds)
        })
        .collect();
    stable_hash(&(
        &r.name,
        (&m.route_name, &m.host, &m.path_prefix, &m.methods),
        bounds,
        operations,
    ))
}

impl Plan {
    /// Compiles a validated configuration.
    pub fn compile(c: &Config) -> Plan {
        let mut needs = Needs::default();
        let routes = c
            .routes
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let m = &r.matching;
                needs.route_name |= m.route_name.is_some();
                needs.host |= m.host.is_some();
                needs.path |= m.path_prefix.is_some();
                needs.method |= !m.methods.is_empty();
                let route_fp = route_fingerprint(r, c.shadow);
                // A shared-data bound's fingerprint counts the route's own
                // bounds by their written index, and an operation's by the
                // shared-data bounds before it: kept, so no count restarts.
                let mut bounds: Vec<Bound> = r
                    .bounds
                    .iter()
                    .enumerate()
                    .map(|(j, b)| {
                        let at = At {
                            route: i,
                            op: None,
                            index: j,
                            slot: j,
                        };
                        compile_bound(b, &r.name, at, route_fp, c)
                    })
                    .collect();
                let mut slot = bounds.iter().filter(|b| b.in_shared_data()).count();
                let phases = |range: Range<usize>, bounds: &[Bound]| {
                    let mut early = Vec::new();
                    let mut late = Vec::new();
                    for j in range {
                        match bounds.get(j).filter(|b| b.in_shared_data()) {
                            Some(b) if b.needs_identity() => late.push(BoundId(j)),
                            Some(_) => early.push(BoundId(j)),
                            None => {}
                        }
                    }
                    (early, late)
                };
                let (early, late) = phases(0..bounds.len(), &bounds);
                let mut operations = Vec::with_capacity(r.operations.len());
                let mut templates = Vec::with_capacity(r.operations.len());
                for (k, o) in r.operations.iter().enumerate() {
                    let name = operation_name(o, k);
                    let first = bounds.len();
                    for (j, b) in o.bounds.iter().enumerate() {
                        let at = At {
                            route: i,
                            op: Some((k, &name)),
                            index: j,
                            slot,
                        };
                        slot += usize::from(b.scope.in_shared_data());
                        bounds.push(compile_bound(b, &r.name, at, route_fp, c));
                    }
                    let (op_early, op_late) = phases(first..bounds.len(), &bounds);
                    // Validated; an unparsable template matches nothing.
                    templates.push(parse_template(&o.path).unwrap_or_default());
                    operations.push(Operation {
                        index: k,
                        name,
                        method: o.method.clone(),
                        path: o.path.clone(),
                        operation_id: o.operation_id.clone(),
                        bounds: first..bounds.len(),
                        early: [early.as_slice(), &op_early].concat(),
                        late: [late.as_slice(), &op_late].concat(),
                    });
                }
                let named_costs = (0..bounds.len())
                    .filter(|&j| {
                        bounds
                            .get(j)
                            .and_then(|b| b.cost.as_ref())
                            .is_some_and(|c| !c.from_response())
                    })
                    .map(BoundId)
                    .collect();
                let plain_answers = bounds
                    .iter()
                    .any(|b| b.cost.as_ref().is_some_and(|c| c.source.in_body()));
                let reading = || bounds.iter().filter_map(|b| b.cost.as_ref());
                // A bound per model reads the body's `model` too.
                let per_model = bounds.iter().any(|b| b.per == Per::Model);
                let reads_request = reading()
                    .filter(|c| c.reads_request() || (per_model && c.source.in_body()))
                    .map(|c| c.max_request_bytes)
                    .max();
                let asks_usage = reading()
                    .filter(|c| c.ask_usage)
                    .find_map(|c| c.source.usage_pointer().map(str::to_string));
                let service_bounds = (0..bounds.len())
                    .filter(|&j| bounds.get(j).is_some_and(|b| !b.in_shared_data()))
                    .map(BoundId)
                    .collect();
                let op_tree = (!operations.is_empty()).then(|| {
                    OpTree::new(
                        operations
                            .iter()
                            .zip(&templates)
                            .map(|(o, t)| (o.method.as_str(), t.as_slice())),
                    )
                });
                needs.path |= op_tree.is_some();
                needs.method |= op_tree.is_some();
                Route {
                    index: i,
                    name: r.name.clone(),
                    matcher: Matcher::new(m),
                    matching: m.clone(),
                    // user/org/token/account bounds fall back to the address.
                    needs_address: bounds.iter().any(|b| b.per != Per::Route),
                    bounds,
                    early,
                    late,
                    operations,
                    op_tree,
                    service_bounds,
                    named_costs,
                    plain_answers,
                    reads_request,
                    asks_usage,
                    account: r.account.clone(),
                }
            })
            .collect();
        Plan {
            instance: c.instance.clone(),
            success_headers: c.success_headers,
            style: match (c.header_profile, c.structured_headers) {
                (HeaderProfile::RateLimit, false) => Style::RateLimit,
                (HeaderProfile::RateLimit, true) => Style::RateLimitStructured,
                (HeaderProfile::XRateLimit, _) => Style::XRateLimit,
                (HeaderProfile::Draft, _) => Style::Draft,
            },
            grpc_refusal: match c.grpc_refusal {
                GrpcRefusal::ResourceExhausted => crate::reply::grpc::RESOURCE_EXHAUSTED,
                GrpcRefusal::Unavailable => crate::reply::grpc::UNAVAILABLE,
            },
            shadow_headers: c.shadow_headers,
            would_refuse_header: c.would_refuse_header.clone(),
            hold_sign_in_headers: c.hold_sign_in_headers,
            routes,
            needs,
            identity: c.identity.clone(),
            client_address: c.client_address.prefixes(),
            service: c.rate_limit_service.clone(),
            key_secret: c
                .rate_limit_service
                .as_ref()
                .and_then(|s| s.key_secret.as_ref()?.value.as_ref())
                .map(|v| crate::config::Secret(v.as_bytes().to_vec())),
            also_key_secret: c
                .rate_limit_service
                .as_ref()
                .and_then(|s| s.key_secret.as_ref()?.also_read.as_ref()?.value.as_ref())
                .map(|v| crate::config::Secret(v.as_bytes().to_vec())),
            hash: stable_hash(&format!("{c:?}")),
        }
    }

    /// The first route whose matcher accepts the request.
    pub fn route_for(&self, r: &RequestInfo) -> Option<RouteId> {
        self.route_for_normalized(&r.normalized())
    }

    /// [`Plan::route_for`] of a request already normalised (the request
    /// path normalises once, for the route and its operation).
    pub fn route_for_normalized(&self, r: &Normalized) -> Option<RouteId> {
        self.routes
            .iter()
            .position(|route| route.matcher.matches(r))
            .map(RouteId)
    }

    pub fn route(&self, id: RouteId) -> Option<&Route> {
        self.routes.get(id.0)
    }

    /// Every route with its handle.
    pub fn routes_with_ids(&self) -> impl Iterator<Item = (RouteId, &Route)> {
        self.routes.iter().enumerate().map(|(i, r)| (RouteId(i), r))
    }

    /// Some bound is a fleet bound: the configuration syncs.
    pub fn has_fleet_bounds(&self) -> bool {
        self.routes
            .iter()
            .any(|r| r.bounds.iter().any(|b| b.fleet().is_some()))
    }

    /// What every shared-data bound, in plan order, asks of the lane
    /// directory.
    pub fn wants(&self) -> Vec<crate::count::directory::Want> {
        self.routes
            .iter()
            .flat_map(|r| r.bounds.iter())
            .filter(|b| b.in_shared_data())
            .map(|b| crate::count::directory::Want {
                fingerprint: b.fingerprint,
                table: b.per != Per::Route,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fingerprints(p: &Plan) -> Vec<u64> {
        p.wants().iter().map(|w| w.fingerprint).collect()
    }
    use crate::config::parse;

    fn plan(json: &str) -> Plan {
        Plan::compile(&parse(json.as_bytes()).unwrap())
    }

    const TWO: &str = r#"{"routes":[
        {"name":"a","match":{"route_name":"r1","path_prefix":"/a","methods":["GET"]},
         "bounds":[{"per":"address","limit":5,"window":"PT1M"}]},
        {"name":"b","match":{"host":"example.com"},
         "bounds":[{"per":"route","limit":100,"window":"PT1M"}]},
        {"name":"rest","bounds":[{"per":"route","limit":1,"window":"PT1S"}]}]}"#;

    #[test]
    fn first_matching_route_wins() {
        let p = plan(TWO);
        let req = |rn, host, path, m| RequestInfo {
            route_name: rn,
            host,
            path,
            method: m,
        };
        assert_eq!(
            p.route_for(&req(Some("r1"), None, Some("/a/x?q=1"), Some("GET"))),
            Some(RouteId(0))
        );
        assert_eq!(
            p.route_for(&req(Some("r1"), None, Some("/a"), Some("POST"))),
            Some(RouteId(2))
        );
        assert_eq!(
            p.route_for(&req(Some("r2"), None, Some("/a"), Some("GET"))),
            Some(RouteId(2))
        );
        assert_eq!(
            p.route_for(&req(None, Some("Example.COM:8080"), None, None)),
            Some(RouteId(1))
        );
        assert_eq!(
            p.route_for(&req(None, Some("example.org"), None, None)),
            Some(RouteId(2))
        );
        // The query string is not part of the path.
        assert_eq!(
            p.route_for(&req(Some("r1"), None, Some("/x?/a"), Some("GET"))),
            Some(RouteId(2))
        );
        assert!(p.needs.route_name && p.needs.host && p.needs.path && p.needs.method);
    }

    #[test]
    fn odd_spellings_match_what_the_upstream_understands() {
        let p = plan(
            r#"{"routes":[
            {"name":"h","match":{"host":"Example.com.","path_prefix":"/h/"},"bounds":[{"per":"route","limit":1,"window":"PT1S"}]},
            {"name":"p","match":{"host":"example.net:8080","path_prefix":"/p/"},"bounds":[{"per":"route","limit":1,"window":"PT1S"}]},
            {"name":"tls","match":{"host":"example.org:443","path_prefix":"/t/"},"bounds":[{"per":"route","limit":1,"window":"PT1S"}]},
            {"name":"v6","match":{"host":"[::1]","path_prefix":"/6/"},"bounds":[{"per":"route","limit":1,"window":"PT1S"}]},
            {"name":"api","match":{"path_prefix":"/api/","methods":["GET"]},"bounds":[{"per":"route","limit":1,"window":"PT1S"}]},
            {"name":"shop","match":{"path_prefix":"/shop/"},"operations":[
              {"name":"pay","method":"POST","path":"/shop/orders/{id}/pay","bounds":[{"per":"route","limit":1,"window":"PT1S"}]},
              {"name":"get","method":"GET","path":"/shop/orders/{id}","bounds":[{"per":"route","limit":1,"window":"PT1S"}]}]}]}"#,
        );
        let at = |host: Option<&str>, path: &str, method: &str| {
            let req = RequestInfo {
                route_name: None,
                host,
                path: Some(path),
                method: Some(method),
            };
            let r = p.route_for(&req)?;
            let op = p.routes[r.0].operation_for(&req.normalized());
            Some((p.routes[r.0].name.as_str(), op.map(|o| o.0)))
        };
        let api = Some(("api", None));
        for path in [
            "/api/x",
            "/%61pi/x",
            "//api/x",
            "/./api/x",
            "/x/../api/x",
            "/../../api/x",
            "/%2e/api/x",
            "/x/%2E%2E/api/x",
            "/api%2Fx",
            "/api%2fx",
            "/api%5Cx",
            "/api\\x",
            "/api/",
            "/api/x?y=1",
        ] {
            assert_eq!(at(None, path, "GET"), api, "{path}");
        }
        assert_eq!(at(None, "/api/x", "HEAD"), api, "HEAD is a GET");
        assert_eq!(at(None, "/api/x", "POST"), None);
        assert_eq!(at(None, "/api", "GET"), None);
        assert_eq!(at(None, "/api/../x", "GET"), None);
        assert_eq!(
            at(None, "/%41pi/x", "GET"),
            None,
            "paths are case-sensitive"
        );
        // Hosts: case, one trailing dot, the port.
        for host in [
            "example.com",
            "EXAMPLE.com.",
            "example.com:8443",
            "Example.Com.:80",
        ] {
            assert_eq!(at(Some(host), "/h/x", "GET"), Some(("h", None)), "{host}");
        }
        for host in ["example.com..", "example.co", "www.example.com"] {
            assert_ne!(at(Some(host), "/h/x", "GET"), Some(("h", None)), "{host}");
        }
        for host in ["example.net:8080", "EXAMPLE.net.:8080", "example.net:08080"] {
            assert_eq!(at(Some(host), "/p/x", "GET"), Some(("p", None)), "{host}");
        }
        for host in ["example.net", "example.net:9090", "example.net:80"] {
            assert_eq!(at(Some(host), "/p/x", "GET"), None, "{host}");
        }
        // A default port written in the configuration is also the authority
        // without one (the port a client leaves out).
        for host in ["example.org:443", "example.org", "example.org."] {
            assert_eq!(at(Some(host), "/t/x", "GET"), Some(("tls", None)), "{host}");
        }
        assert_eq!(at(Some("example.org:8443"), "/t/x", "GET"), None);
        for host in ["[::1]", "[::1]:80"] {
            assert_eq!(at(Some(host), "/6/x", "GET"), Some(("v6", None)), "{host}");
        }
        // Operations: the same spellings; HEAD is a GET; an id may hold an
        // encoded slash.
        let shop = |op| Some(("shop", Some(op)));
        for path in [
            "/shop/orders/7/pay",
            "/shop//orders/7/./%70ay",
            "/shop/x/../orders/%37/pay?q=/",
            "/shop/orders/a%2Fb/pay",
        ] {
            assert_eq!(at(None, path, "POST"), shop(0), "{path}");
        }
        assert_eq!(at(None, "/shop/orders/7", "HEAD"), shop(1));
        assert_eq!(at(None, "/shop/orders/7/pay", "HEAD"), Some(("shop", None)));
    }

    /// A shared-data bound's fingerprint names its counters: the values
    /// this release computes are the previous release's (an upgrade
    /// restarts no count), installation bounds in the list or not.
    #[test]
    fn fingerprints_are_the_previous_releases() {
        let p = plan(
            r#"{"rate_limit_service":{"cluster":"rls","domain":"d"},"routes":[{"name":"r","bounds":[
            {"name":"i","per":"address","limit":5,"window":"PT1M","scope":"installation"},
            {"name":"a","per":"address","limit":5,"window":"PT1M"},
            {"name":"f","per":"address","limit":50,"window":"PT1M","scope":"fleet"}],
          "operations":[{"name":"o","method":"GET","path":"/x","bounds":[
            {"name":"oi","per":"route","limit":5,"window":"PT1H","scope":"installation"},
            {"name":"ob","per":"route","limit":7,"window":"PT1M"}]}]}]}"#,
        );
        let shared: Vec<(&str, u64)> = p.routes[0]
            .bounds
            .iter()
            .filter(|b| b.in_shared_data())
            .map(|b| (b.name.as_str(), b.fingerprint))
            .collect();
        // Hashing a usize writes its width: the module (wasm32) computes
        // other values from the same function, which these pin.
        #[cfg(target_pointer_width = "64")]
        assert_eq!(
            shared,
            [
                ("a", 0xa950_022e_e9fc_7d74),
                ("f", 0x6ba0_2386_21ad_e7ca),
                ("o.ob", 0x0dcc_46e3_55ad_e7cb)
            ]
        );
        assert_eq!(shared.len(), 3);
        let r = &p.routes[0];
        let names = |ids: &[BoundId]| -> Vec<&str> {
            ids.iter()
                .map(|&i| r.bound(i).unwrap().name.as_str())
                .collect()
        };
        assert_eq!(names(&r.service_bounds), ["i", "o.oi"]);
        assert_eq!(names(&r.early), ["a", "f"]);
        // An operation's lists hold the route's first, built once.
        assert_eq!(names(&r.operations[0].early), ["a", "f", "o.ob"]);
        assert_eq!(names(r.early_bounds(Some(OpId(0)))), ["a", "f", "o.ob"]);
        assert_eq!(names(r.early_bounds(None)), ["a", "f"]);
        assert_eq!(
            r.installation_bounds(None)
                .map(|(_, b)| b.name.as_str())
                .collect::<Vec<_>>(),
            ["i"]
        );
        assert_eq!(
            r.installation_bounds(Some(OpId(0)))
                .map(|(_, b)| b.name.as_str())
                .collect::<Vec<_>>(),
            ["i", "o.oi"]
        );
        assert_eq!(p.wants().len(), 3, "a lane for each shared-data bound only");
    }

    #[test]
    fn changing_a_route_changes_only_its_fingerprints() {
        let p1 = plan(TWO);
        let p2 = plan(&TWO.replace(r#""limit":100"#, r#""limit":200"#));
        let (f1, f2) = (fingerprints(&p1), fingerprints(&p2));
        assert_eq!(f1[0], f2[0], "route a unchanged");
        assert_ne!(f1[1], f2[1], "route b changed");
        assert_eq!(f1[2], f2[2], "route rest unchanged");
        assert_ne!(p1.hash, p2.hash);
        // Same text, same fingerprints: they agree across workers.
        assert_eq!(f1, fingerprints(&plan(TWO)));
    }

    /// A rollout's steps (`enforce_percent` 0 → 25 → 100) keep the counts;
    /// the bound's own share, else the configuration's, else 100.
    #[test]
    fn enforce_percent_is_no_part_of_a_fingerprint() {
        let p1 = plan(TWO);
        let stepped = TWO.replace(r#""limit":100"#, r#""limit":100,"enforce_percent":25"#);
        let p2 = plan(&format!(r#"{{"enforce_percent":50,{}"#, &stepped[1..]));
        assert_eq!(fingerprints(&p1), fingerprints(&p2));
        let percents: Vec<u8> = p2
            .routes
            .iter()
            .flat_map(|r| r.bounds.iter().map(|b| b.enforce_percent))
            .collect();
        assert!(percents.contains(&25) && percents.contains(&50));
        assert!(p1
            .routes
            .iter()
            .all(|r| r.bounds.iter().all(|b| b.enforce_percent == 100)));
    }

    #[test]
    fn a_matcher_covers_the_narrower_ones() {
        let m =
            |route_name: Option<&str>, host: Option<&str>, path: Option<&str>, methods: &[&str]| {
                Matcher::new(&MatchConfig {
                    route_name: route_name.map(str::to_string),
                    host: host.map(str::to_string),
                    path_prefix: path.map(str::to_string),
                    methods: methods.iter().map(|s| s.to_string()).collect(),
                })
            };
        let any = m(None, None, None, &[]);
        let api = m(None, None, Some("/api"), &[]);
        let api_get = m(None, None, Some("/api/v1"), &["GET"]);
        assert!(any.covers(&api) && any.covers(&api_get) && api.covers(&api_get));
        assert!(!api.covers(&any) && !api_get.covers(&api));
        // Methods: a set covers its subsets, never "any method".
        assert!(m(None, None, None, &["GET", "POST"]).covers(&m(None, None, None, &["GET"])));
        assert!(!m(None, None, None, &["GET"]).covers(&m(None, None, None, &["GET", "POST"])));
        assert!(!m(None, None, None, &["GET"]).covers(&any));
        // HEAD is taken wherever GET is.
        let (get, head) = (
            m(None, None, None, &["GET"]),
            m(None, None, None, &["HEAD"]),
        );
        assert!(get.covers(&head) && !head.covers(&get));
        assert!(get.covers(&m(None, None, None, &["GET", "HEAD"])));
        // Hosts: case-insensitive; a host without a port covers it on a port.
        let h = |s| m(None, Some(s), None, &[]);
        assert!(h("Example.com").covers(&h("example.COM")));
        assert!(h("example.com").covers(&h("example.com:8080")));
        assert!(!h("example.com:8080").covers(&h("example.com")));
        assert!(!h("example.com").covers(&h("example.org")));
        assert!(h("example.com.").covers(&h("Example.com:443")));
        assert!(h("example.com:443").covers(&h("example.com:443")));
        assert!(!h("example.com:443").covers(&h("example.com:80")));
        // Path prefixes compare normalised.
        let p = |s| m(None, None, Some(s), &[]);
        assert!(p("/%61pi").covers(&p("/api//v1")) && p("/api/").covers(&p("/x/../api/v1")));
        // Route names: equal or absent.
        assert!(m(Some("r"), None, None, &[]).covers(&m(Some("r"), None, Some("/x"), &[])));
        assert!(!m(Some("r"), None, None, &[]).covers(&m(Some("s"), None, None, &[])));
        assert!(!m(Some("r"), None, None, &[]).covers(&any));
        // What `covers` claims, `matches` confirms.
        let req = RequestInfo {
            route_name: Some("r"),
            host: Some("example.com:8080"),
            path: Some("/api/v1/x"),
            method: Some("GET"),
        };
        for (a, b) in [
            (&any, &api),
            (&api, &api_get),
            (&h("example.com"), &h("example.com:8080")),
        ] {
            assert!(a.covers(b));
            let req = req.normalized();
            assert!(!b.matches(&req) || a.matches(&req));
        }
    }

    #[test]
    fn bounds_of_one_route_have_distinct_fingerprints() {
        let p = plan(
            r#"{"routes":[{"name":"a","bounds":[
            {"per":"address","limit":5,"window":"PT1M"},{"per":"address","limit":5,"window":"PT1M","name":"x"}]}]}"#,
        );
        let f = fingerprints(&p);
        assert_ne!(f[0], f[1]);
    }
}

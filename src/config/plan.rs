//! The compiled, immutable form of a configuration: the one model both the
//! request path (route matchers, bounds with their rates, fingerprints that
//! say whether a route changed between two configurations) and the console
//! (warnings, `explain`) read. A configuration is compiled once; what was
//! written that only the console needs (JSON paths, names, windows as
//! written, the match as written) is kept beside what the request path reads.

use crate::config::installation::{InstallationBound, Unit};
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
    pub bounds: Vec<Bound>,
    /// Bounds that need no identity, checked first: before any identity
    /// is resolved, before the body, before the upstream.
    pub early: Vec<usize>,
    /// Bounds keyed on or narrowed by identity, checked once it is known.
    pub late: Vec<usize>,
    /// Some bound is keyed on the client address (fallbacks included).
    pub needs_address: bool,
    /// Operations with bounds of their own (theirs follow the route's in
    /// `bounds`, operation by operation), and the tree that finds a
    /// request's operation.
    pub operations: Vec<Operation>,
    pub op_tree: Option<OpTree>,
    /// Bounds counted by the rate-limit service, checked last: after every
    /// node bound admitted the request.
    pub installation: Vec<InstallationBound>,
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
    /// Its bounds in the route's `bounds`, then the same by phase.
    pub bounds: Range<usize>,
    pub early: Vec<usize>,
    pub late: Vec<usize>,
}

impl Route {
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

    /// The bounds a request to operation `op` is checked against before
    /// identity: the route's, then the operation's.
    pub fn early_bounds(&self, op: Option<usize>) -> Cow<'_, [usize]> {
        match op.and_then(|o| self.operations.get(o)) {
            None => Cow::Borrowed(&self.early),
            Some(o) => Cow::Owned([self.early.as_slice(), &o.early].concat()),
        }
    }

    /// Some bound of the route, or of operation `op`, needs an identity.
    pub fn needs_identity(&self, op: Option<usize>) -> bool {
        !self.late.is_empty()
            || op
                .and_then(|o| self.operations.get(o))
                .is_some_and(|o| !o.late.is_empty())
            || self
                .installation_bounds(op)
                .any(|b| b.per.needs_identity() || !b.applies_to.is_everybody())
    }

    /// Bounds that need identity (before `applies_to` narrows them).
    pub fn late_bounds(&self, op: Option<usize>) -> Vec<usize> {
        let mut v = self.late.clone();
        if let Some(o) = op.and_then(|o| self.operations.get(o)) {
            v.extend_from_slice(&o.late);
        }
        v
    }

    /// The installation bounds a request to operation `op` is counted by
    /// (before `applies_to` narrows them).
    pub fn installation_bounds(
        &self,
        op: Option<usize>,
    ) -> impl Iterator<Item = &InstallationBound> {
        self.installation
            .iter()
            .filter(move |b| b.op.is_none() || b.op == op)
    }

    /// The operation a request is, when the route lists operations: under
    /// either reading of its path.
    pub fn operation_for(&self, r: &Normalized) -> Option<usize> {
        let tree = self.op_tree.as_ref()?;
        let method = r.method?;
        r.paths().find_map(|p| tree.find(method, p))
    }
}

#[derive(Debug, Clone)]
pub struct Bound {
    /// As refusals and stats name it: the bound's own name, or
    /// `<operation>.<bound>` for an operation's ([`qualified_name`]).
    pub name: String,
    pub per: Per,
    pub applies_to: Access,
    pub rate: Rate,
    /// Counts, never refuses.
    pub shadow: bool,
    /// Identity of this bound in this route as compiled: any change to the
    /// route's matching or to any of its bounds gives every bound of the
    /// route a new fingerprint, so its counters start again.
    pub fingerprint: u64,
    /// A fleet bound: the `bound` descriptor value (`<route>.<name>`) its
    /// counts are synced under with the rate-limit service.
    pub fleet: Option<String>,
    /// Where and how it was written, for the console.
    pub written: Written,
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
    fn matches(&self, authority: &normalize::Host) -> bool {
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
    host: Option<normalize::Host<'a>>,
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
/// `index` in its list, at `slot` in the route's compiled `bounds`.
struct At<'a> {
    route: usize,
    op: Option<(usize, &'a str)>,
    index: usize,
    slot: usize,
}

fn compile_bound(b: &BoundConfig, route: &str, at: At, route_fp: u64, all_shadow: bool) -> Bound {
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
    let fleet = (b.scope == Scope::Fleet).then(|| format!("{route}.{name}"));
    Bound {
        name,
        per: b.per,
        applies_to: b.applies_to.clone(),
        shadow: b.shadow || all_shadow,
        rate: Rate {
            limit: u32::try_from(b.limit).unwrap_or(u32::MAX),
            // The one conversion of a window to milliseconds. Validated: the
            // fallback (a minute) is never reached.
            window_ms: window_ms(&b.window).unwrap_or(60_000),
        },
        // A fleet bound's entries are not a node bound's: the same bound
        // turned fleet (or back) must not read the other's counters. Salted
        // rather than hashed with the scope, so that no node bound's
        // fingerprint (and count) changes with this release.
        fingerprint: stable_hash(&(route_fp, at.slot))
            ^ if fleet.is_some() { FLEET_SALT } else { 0 },
        fleet,
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

/// An installation bound of a validated configuration (its window is one
/// of the service's units).
fn compile_installation(
    b: &BoundConfig,
    route: &str,
    at: At,
    all_shadow: bool,
) -> InstallationBound {
    let own = bound_name(b, at.index);
    let (name, path) = match at.op {
        None => (own, format!("$.routes[{}].bounds[{}]", at.route, at.index)),
        Some((k, op)) => (
            qualified_name(op, &own),
            format!(
                "$.routes[{}].operations[{k}].bounds[{}]",
                at.route, at.index
            ),
        ),
    };
    InstallationBound {
        descriptor: format!("{route}.{name}"),
        name,
        op: at.op.map(|(k, _)| k),
        index: at.index,
        path,
        window: b.window.clone(),
        per: b.per,
        applies_to: b.applies_to.clone(),
        limit: u32::try_from(b.limit).unwrap_or(u32::MAX),
        unit: window_ms(&b.window)
            .ok()
            .and_then(Unit::of_ms)
            .unwrap_or(Unit::Minute),
        shadow: b.shadow || all_shadow,
    }
}

impl Bound {
    /// Keyed on, or narrowed by, who the caller is.
    pub fn needs_identity(&self) -> bool {
        self.per.needs_identity() || !self.applies_to.is_everybody()
    }
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
                let mut installation = Vec::new();
                let mut bounds: Vec<Bound> = r
                    .bounds
                    .iter()
                    .enumerate()
                    .filter(|(j, b)| {
                        let node = b.scope.in_shared_data();
                        if !node {
                            let at = At {
                                route: i,
                                op: None,
                                index: *j,
                                slot: *j,
                            };
                            installation.push(compile_installation(b, &r.name, at, c.shadow));
                        }
                        node
                    })
                    .map(|(j, b)| {
                        let at = At {
                            route: i,
                            op: None,
                            index: j,
                            slot: j,
                        };
                        compile_bound(b, &r.name, at, route_fp, c.shadow)
                    })
                    .collect();
                let phases =
                    |range: std::ops::Range<usize>, bounds: &[Bound]| -> (Vec<usize>, Vec<usize>) {
                        range.partition(|j| bounds.get(*j).is_some_and(|b| !b.needs_identity()))
                    };
                let (early, late) = phases(0..bounds.len(), &bounds);
                let mut operations = Vec::with_capacity(r.operations.len());
                let mut templates = Vec::with_capacity(r.operations.len());
                for (k, o) in r.operations.iter().enumerate() {
                    let name = operation_name(o, k);
                    let first = bounds.len();
                    for (j, b) in o.bounds.iter().enumerate() {
                        if !b.scope.in_shared_data() {
                            let at = At {
                                route: i,
                                op: Some((k, &name)),
                                index: j,
                                slot: j,
                            };
                            installation.push(compile_installation(b, &r.name, at, c.shadow));
                            continue;
                        }
                        let at = At {
                            route: i,
                            op: Some((k, &name)),
                            index: j,
                            slot: bounds.len(),
                        };
                        bounds.push(compile_bound(b, &r.name, at, route_fp, c.shadow));
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
                        early: op_early,
                        late: op_late,
                    });
                }
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
                    needs_address: bounds.iter().any(|b| b.per != Per::Route)
                        || installation.iter().any(|b| b.per != Per::Route),
                    bounds,
                    early,
                    late,
                    operations,
                    op_tree,
                    installation,
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
            hash: stable_hash(&format!("{c:?}")),
        }
    }

    /// The first route whose matcher accepts the request.
    pub fn route_for(&self, r: &RequestInfo) -> Option<usize> {
        self.route_for_normalized(&r.normalized())
    }

    /// [`Plan::route_for`] of a request already normalised (the request
    /// path normalises once, for the route and its operation).
    pub fn route_for_normalized(&self, r: &Normalized) -> Option<usize> {
        self.routes
            .iter()
            .position(|route| route.matcher.matches(r))
    }

    /// Some bound is a fleet bound: the configuration syncs.
    pub fn has_fleet_bounds(&self) -> bool {
        self.routes
            .iter()
            .any(|r| r.bounds.iter().any(|b| b.fleet.is_some()))
    }

    /// What every bound, in plan order, asks of the lane directory.
    pub fn wants(&self) -> Vec<crate::count::directory::Want> {
        self.routes
            .iter()
            .flat_map(|r| r.bounds.iter())
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
            Some(0)
        );
        assert_eq!(
            p.route_for(&req(Some("r1"), None, Some("/a"), Some("POST"))),
            Some(2)
        );
        assert_eq!(
            p.route_for(&req(Some("r2"), None, Some("/a"), Some("GET"))),
            Some(2)
        );
        assert_eq!(
            p.route_for(&req(None, Some("Example.COM:8080"), None, None)),
            Some(1)
        );
        assert_eq!(
            p.route_for(&req(None, Some("example.org"), None, None)),
            Some(2)
        );
        // The query string is not part of the path.
        assert_eq!(
            p.route_for(&req(Some("r1"), None, Some("/x?/a"), Some("GET"))),
            Some(2)
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
            let op = p.routes[r].operation_for(&req.normalized());
            Some((p.routes[r].name.as_str(), op))
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

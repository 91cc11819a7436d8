//! A route's `match`, normalised once at compile time, and the request it is
//! compared with, normalised once per request.

use crate::config::normalize;
use crate::config::MatchConfig;
use std::borrow::Cow;

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
    pub(super) method: Option<&'a str>,
}

impl<'a> RequestInfo<'a> {
    pub(crate) fn normalized(&self) -> Normalized<'a> {
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
    pub(super) fn paths(&self) -> impl Iterator<Item = &str> {
        self.path.iter().chain(&self.path_kept).map(|p| p.as_ref())
    }
}

impl Matcher {
    pub(super) fn new(m: &MatchConfig) -> Matcher {
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

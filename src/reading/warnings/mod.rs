//! What is legal but probably not meant, said out loud: by the CLI (`check`,
//! `explain`) and by the filter once at configure time. Pure: a compiled
//! [`Plan`] in, [`Warning`]s out, in route order.
//!
//! The checks read the plan the request path runs (matchers, rates, who each
//! bound applies to) and what it keeps of what was written (JSON paths,
//! names, the match as written), so a warning is about exactly what runs.
//!
//! - [`routes`]: a route never reached, without bounds, or bounding only some;
//! - [`bounds`]: a bound another always refuses before, and the per-node note;
//! - [`operations`]: an operation its route's `match` never lets through;
//! - [`counters`]: how many counters a route's operation bounds can hold;
//! - [`signin`]: sign-in routes, and keys sent to the service without a secret;
//! - [`trust`]: identity headers Envoy must strip from clients.

mod bounds;
mod counters;
mod operations;
mod routes;
mod signin;
#[cfg(test)]
mod tests;
mod trust;

pub use counters::{Counters, MANY_COUNTERS};
pub use operations::template_reachable;

use crate::config::plan::{Bound, Operation, Plan, Route};
use crate::config::Shape;
use serde::Serialize;
use std::fmt;

/// A note informs (the cluster reading of every bound); a warning points at
/// something that is probably a mistake, and fails `check --strict`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Note,
    Warning,
}

/// Stable codes: tools and tests match on these, never on the messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WarningCode {
    /// A route that matches requests and bounds none of them.
    NoBounds,
    /// A route whose every bound is narrowed: everyone else is unbounded.
    NarrowedOnly,
    /// A bound's figure is per Envoy node, not per installation.
    PerNode,
    /// A bound that never refuses: another bound of the route always does first.
    UnreachableBound,
    /// A route that never matches: an earlier route takes all its requests.
    ShadowedRoute,
    /// A route's operation bounds can hold a large number of counters.
    ManyCounters,
    /// An operation bound that refuses nothing a route bound would admit.
    LooseOperationBound,
    /// An operation the route never sees: its `match` excludes the
    /// operation's path or method.
    UnreachableOperation,
    /// An installation bound's reading (the counterpart of `PerNode`).
    Installation,
    /// A fleet bound's reading: one budget, and how far over it may go.
    Fleet,
    /// A configuration with no routes: the filter counts and refuses nothing.
    NoRoutes,
    /// Keys sent to the rate-limit service are hashed without a secret.
    NoKeySecret,
    /// A sign-in route (account in the body) that takes every method.
    SignInAnyMethod,
    /// Fleet bounds without `fleet_nodes`: a node that starts while the
    /// service is down takes the whole limit alone.
    FleetNodes,
    /// A bound that carries out only part of its refusals (a rollout).
    PartlyEnforced,
    /// A cost the response names, reserved 1 at admission: requests in
    /// flight can pass the limit by nearly their whole answers.
    CostReserve,
    /// A sign-in route whose account is in the body, without
    /// `hold_sign_in_headers`: a refused attempt still opens an upstream
    /// request.
    SignInHeadsGoOn,
    /// A `header` identity: the headers must be stripped from clients.
    TrustedHeaders,
}

impl WarningCode {
    pub fn as_str(self) -> &'static str {
        match self {
            WarningCode::NoBounds => "no-bounds",
            WarningCode::NarrowedOnly => "narrowed-only",
            WarningCode::PerNode => "per-node",
            WarningCode::UnreachableBound => "unreachable-bound",
            WarningCode::ShadowedRoute => "shadowed-route",
            WarningCode::ManyCounters => "many-counters",
            WarningCode::LooseOperationBound => "loose-operation-bound",
            WarningCode::UnreachableOperation => "unreachable-operation",
            WarningCode::Installation => "installation",
            WarningCode::Fleet => "fleet",
            WarningCode::NoRoutes => "no-routes",
            WarningCode::NoKeySecret => "no-key-secret",
            WarningCode::SignInAnyMethod => "sign-in-any-method",
            WarningCode::FleetNodes => "fleet-nodes",
            WarningCode::PartlyEnforced => "partly-enforced",
            WarningCode::CostReserve => "cost-reserve",
            WarningCode::SignInHeadsGoOn => "sign-in-heads-go-on",
            WarningCode::TrustedHeaders => "trusted-headers",
        }
    }

    pub fn level(self) -> Severity {
        match self {
            WarningCode::PerNode
            | WarningCode::Installation
            | WarningCode::Fleet
            | WarningCode::PartlyEnforced
            | WarningCode::SignInHeadsGoOn
            | WarningCode::TrustedHeaders => Severity::Note,
            _ => Severity::Warning,
        }
    }
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    pub code: WarningCode,
    pub level: Severity,
    /// JSON path of what the warning is about.
    pub path: String,
    /// Index of the route it concerns.
    pub route: usize,
    /// Index of the operation it concerns, when it concerns one (then
    /// `bound` is a bound of that operation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<usize>,
    /// Index of the bound it concerns, when it concerns one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound: Option<usize>,
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}[{}]: {}: {}",
            self.level.as_str(),
            self.code.as_str(),
            self.path,
            self.message
        )
    }
}

/// Every warning and note about a compiled configuration. `nodes` is how
/// many Envoy nodes run it, when known.
pub fn warnings(plan: &Plan, nodes: Option<u32>) -> Vec<Warning> {
    warnings_at(plan, nodes, None)
}

/// [`warnings`], with fleet bounds' figures for nodes admitting `rate`
/// requests a second each.
pub(crate) fn warnings_at(plan: &Plan, nodes: Option<u32>, rate: Option<u32>) -> Vec<Warning> {
    let mut out = check(&plan.routes, nodes);
    if plan.routes.is_empty() {
        out.push(Warning {
            code: WarningCode::NoRoutes,
            level: WarningCode::NoRoutes.level(),
            path: "$.routes".into(),
            route: 0,
            operation: None,
            bound: None,
            message: "the configuration has no routes: the filter counts and refuses nothing"
                .into(),
        });
    }
    out.extend(trust::trusted_headers(plan));
    out.extend(signin::no_key_secret(plan));
    out.extend(plan.routes.iter().filter_map(signin::any_method));
    if !plan.hold_sign_in_headers {
        out.extend(plan.routes.iter().filter_map(signin::heads_go_on));
    }
    for route in &plan.routes {
        for b in route.bounds.iter() {
            let Some(cost) = b
                .cost
                .as_ref()
                .filter(|c| c.from_response() && c.from_request.is_none() && c.reserve == 1)
            else {
                continue;
            };
            let message = format!(
                "reserves 1 {} at admission: a caller with k requests in flight can pass the \
                 limit by k × (its largest answer − 1), since each passes on a counter that \
                 does not hold the others' answers yet. Set \"reserve\" near a typical answer \
                 (docs/cost.md)",
                cost.unit
            );
            out.push(about_bound(WarningCode::CostReserve, route, b, message));
        }
    }
    // Installation and fleet bounds: the per-node reading does not apply;
    // theirs does.
    let cluster = plan.service.as_ref().map_or("", |s| s.cluster.as_str());
    let sync_ms = plan.service.as_ref().map_or(500, |s| s.sync_ms);
    for route in &plan.routes {
        for b in route.bounds.iter().filter(|b| b.fleet().is_some()) {
            let message = crate::reading::words::fleet(b, cluster, sync_ms, nodes, rate);
            out.push(bounds::about(WarningCode::Fleet, route, b, message));
        }
    }
    out.extend(fleet_nodes_unset(plan));
    for route in &plan.routes {
        for b in route
            .bounds
            .iter()
            .filter(|b| !b.shadow && b.enforce_percent < 100)
        {
            let message = format!(
                "carries out {}% of its refusals: the others go on, uncounted by it, as a shadow \
                 bound's would, marked with `{}/{}` in the filter state \
                 `wasm.ratebound.would_refuse` for access logs (docs/rollout.md)",
                b.enforce_percent, route.name, b.name
            );
            out.push(about_bound(WarningCode::PartlyEnforced, route, b, message));
        }
    }
    for route in &plan.routes {
        for b in route.installation_bounds_all() {
            let at = &b.written;
            out.push(Warning {
                code: WarningCode::Installation,
                level: WarningCode::Installation.level(),
                path: at.path.clone(),
                route: route.index,
                operation: at.operation,
                bound: Some(at.index),
                message: Bound::service_reading(
                    cluster,
                    b.installation().map_or(Shape::Sliding, |(_, _, s)| s),
                ),
            });
        }
    }
    out
}

/// Fleet bounds without `fleet_nodes`: until the service has counted the
/// nodes (a node started while it is down, or restarted then), each node
/// takes `limit / 1` alone. The count once heard is kept (never this guess).
fn fleet_nodes_unset(plan: &Plan) -> Option<Warning> {
    let service = plan.service.as_ref()?;
    let route = plan
        .routes
        .iter()
        .find(|r| r.bounds.iter().any(|b| b.fleet().is_some()))?;
    service.fleet_nodes.is_none().then(|| Warning {
        code: WarningCode::FleetNodes,
        level: WarningCode::FleetNodes.level(),
        path: "$.rate_limit_service".into(),
        route: route.index,
        operation: None,
        bound: None,
        message: "fleet bounds without `fleet_nodes`: a node that starts while the rate-limit \
                  service is down, before it has ever counted the nodes, admits each fleet \
                  bound's whole limit alone, and a node just restarted a tenth of the whole \
                  limit per key (not of its share) before its first answer; set it to the \
                  number of nodes you run (the count the service gives is kept after, through \
                  outages)"
            .into(),
    })
}

/// The checks, per route: its own warnings, then its bounds', then each
/// operation's and its bounds'.
pub fn check(routes: &[Route], nodes: Option<u32>) -> Vec<Warning> {
    let mut out = Vec::new();
    for (i, route) in routes.iter().enumerate() {
        out.extend(routes::shadowed(routes.get(..i).unwrap_or_default(), route));
        out.extend(routes::no_bounds(route));
        out.extend(routes::narrowed_only(route));
        out.extend(counters::many_counters(route));
        // Installation bounds have readings of their own (above), and no
        // per-node counter to compare.
        for bound in route.own_bounds().iter().filter(|b| b.in_shared_data()) {
            out.extend(bounds::unreachable(route, None, bound));
            out.extend(bounds::per_node(route, bound, nodes));
        }
        for op in &route.operations {
            out.extend(operations::unreachable_operation(route, op));
            for bound in route
                .operation_bounds(op)
                .iter()
                .filter(|b| b.in_shared_data())
            {
                out.extend(bounds::loose_operation_bound(route, op, bound));
                out.extend(bounds::unreachable(route, Some(op), bound));
                out.extend(bounds::per_node(route, bound, nodes));
            }
        }
    }
    out
}

fn route_path(route: &Route) -> String {
    format!("$.routes[{}]", route.index)
}

fn operation_path(route: &Route, op: &Operation) -> String {
    format!("$.routes[{}].operations[{}]", route.index, op.index)
}

/// A warning about a route, at `path` (the route or a part of it).
fn about_route(code: WarningCode, path: String, route: &Route, message: String) -> Warning {
    Warning {
        code,
        level: code.level(),
        path,
        route: route.index,
        operation: None,
        bound: None,
        message,
    }
}

/// A warning about an operation, at `path` (the operation or a part of it).
fn about_operation(
    code: WarningCode,
    path: String,
    route: &Route,
    op: &Operation,
    message: String,
) -> Warning {
    Warning {
        operation: Some(op.index),
        ..about_route(code, path, route, message)
    }
}

/// A warning about a bound of the route or of one of its operations.
fn about_bound(code: WarningCode, route: &Route, bound: &Bound, message: String) -> Warning {
    Warning {
        operation: bound.written.operation,
        bound: Some(bound.written.index),
        ..about_route(code, bound.written.path.clone(), route, message)
    }
}

//! A validated configuration compiled into the [`Plan`].

use super::cost::Cost;
use super::fingerprint::{bound_fingerprint, route_fingerprint, stable_hash};
use super::tiers::group_tiers;
use super::*;
use crate::config::operations::OpTree;
use crate::config::{
    bound_name, operation_name, BoundConfig, CheckedBound, CheckedScope, Config, GrpcRefusal,
    HeaderProfile, Per, Secret,
};
use crate::count::window::Rate;
use crate::reply::Style;
use std::ops::Range;

/// A bound of route `route` (of its operation `op`, named `op_name`) at
/// `index` in its list; `slot` numbers the route's shared-data bounds, as
/// its fingerprint has always counted them.
struct At<'a> {
    route: usize,
    op: Option<(usize, &'a str)>,
    index: usize,
    slot: usize,
}

fn compile_bound(
    b: &BoundConfig,
    checked: &CheckedBound,
    route: &str,
    at: At,
    route_fp: u64,
    c: &Config,
) -> Bound {
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
    let descriptor = format!("{route}.{name}");
    let cost = b
        .cost
        .as_ref()
        .zip(checked.cost.as_ref())
        .map(|(c, checked_cost)| Cost::compile(c, checked_cost, checked.limit));
    let scope = match checked.counted {
        CheckedScope::Node => BoundScope::Node,
        CheckedScope::Fleet => BoundScope::Fleet { descriptor },
        CheckedScope::Installation(unit, shape) => BoundScope::Installation {
            descriptor,
            unit,
            shape,
        },
    };
    Bound {
        name,
        per: b.per,
        applies_to: b.applies_to.clone(),
        shadow: b.shadow || all_shadow,
        // Not in the fingerprint: a rollout's steps keep the counts.
        enforce_percent: checked.enforce_percent,
        rate: Rate {
            limit: checked.limit,
            window_ms: checked.window_ms,
        },
        fingerprint: bound_fingerprint(route_fp, at.slot, b.scope, cost.as_ref()),
        cost,
        scope,
        written: Written {
            path,
            operation: at.op.map(|(k, _)| k),
            index: at.index,
            name: own,
            window: b.window.clone(),
        },
        tier: Tier::Own,
    }
}

impl Plan {
    /// Compiles a validated configuration: its typed values, read beside
    /// what was written (each list as long as the one written).
    pub fn compile(c: &Config) -> Plan {
        let mut needs = Needs::default();
        let routes = c
            .routes
            .iter()
            .zip(&c.checked().routes)
            .enumerate()
            .map(|(i, (r, route_checked))| {
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
                    .zip(&route_checked.bounds)
                    .enumerate()
                    .map(|(j, (b, checked))| {
                        let at = At {
                            route: i,
                            op: None,
                            index: j,
                            slot: j,
                        };
                        compile_bound(b, checked, &r.name, at, route_fp, c)
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
                let ops = r.operations.iter().zip(&route_checked.operations);
                for (k, (o, op_checked)) in ops.enumerate() {
                    let name = operation_name(o, k);
                    let first = bounds.len();
                    for (j, (b, checked)) in o.bounds.iter().zip(&op_checked.bounds).enumerate() {
                        let at = At {
                            route: i,
                            op: Some((k, &name)),
                            index: j,
                            slot,
                        };
                        slot += usize::from(b.scope.in_shared_data());
                        bounds.push(compile_bound(b, checked, &r.name, at, route_fp, c));
                    }
                    let (op_early, op_late) = phases(first..bounds.len(), &bounds);
                    templates.push(op_checked.template.as_slice());
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
                group_tiers(&mut bounds);
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
                            .map(|(o, t)| (o.method.as_str(), *t)),
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
                    account_headers: account::headers(r.account.as_ref()),
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
            would_refuse_spellings: c
                .would_refuse_header
                .as_deref()
                .map(account::header_spellings)
                .unwrap_or_default(),
            hold_sign_in_headers: c.hold_sign_in_headers,
            routes,
            needs,
            identity: c.identity.clone(),
            client_address: Prefixes {
                ipv4: c.checked().ipv4_prefix,
                ipv6: c.checked().ipv6_prefix,
            },
            service: c.rate_limit_service.clone(),
            key_secret: c
                .rate_limit_service
                .as_ref()
                .and_then(|s| s.key_secret.as_ref()?.value.as_ref())
                .map(|v| Secret(v.as_bytes().to_vec())),
            also_key_secret: c
                .rate_limit_service
                .as_ref()
                .and_then(|s| s.key_secret.as_ref()?.also_read.as_ref()?.value.as_ref())
                .map(|v| Secret(v.as_bytes().to_vec())),
            hash: stable_hash(&format!("{:?}", c.written())),
        }
    }
}

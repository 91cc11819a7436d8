//! The last phase: installation bounds, counted by the rate-limit service
//! (envoyproxy/ratelimit over Redis) in one `ShouldRateLimit` call.
//!
//! Reached only once every node bound admitted the request (read, nothing
//! recorded): cheap bounds refuse first and never cost a round trip, and a
//! request the service refuses is counted by no node bound, because node
//! bounds are committed only after the service said OK.
//!
//! Keys sent to the service never carry a caller's value in clear: each is
//! a 128-bit SipHash keyed by the installation's secret and the domain
//! (`rls::service_keys`: every Envoy of the installation derives the same
//! key), `v…` for a value and `n…` for the network of a caller without
//! one — the two can never collide.
//!
//! A caller the service has locked out (at or over its limit in the
//! current window) is remembered in shared data ([`crate::count::locks`])
//! and refused here until that window ends, without a call.

use crate::config::plan::{Bound, BoundId, OpId, Route};
use crate::config::Unit;
use crate::config::{Per, RateLimitServiceConfig, ServiceOnError};
use crate::count::locks;
use crate::count::window::Quota;
use crate::identity::address::Prefixes;
use crate::identity::Identity;
use crate::pipeline::caller_key::{self, Named};
use crate::pipeline::flight::Flight;
use crate::pipeline::limiter::{BoundEvent, Event, Receipt, Receipts, RouteLanes};
use crate::pipeline::{Decision, Host, Level, Worker};
use crate::reply::Shown;
use crate::rls::{self, Code, DescriptorSpec, Override, RlsError};
use crate::stats::Stat;
use siphasher::sip128::{Hasher128, SipHasher13};
use smallvec::SmallVec;
use std::hash::Hasher;

/// A descriptor's entries: `bound`, and the caller's key unless `per: route`.
type Entries<'a> = SmallVec<[(&'a str, &'a str); 2]>;

/// One descriptor of a call to the service: counted under
/// `[("bound", bound), (per, caller)]` (no caller for `per: route`), with
/// the limit sent as an override, adding `hits`.
pub(in crate::pipeline) struct Descriptor<'a> {
    pub bound: &'a str,
    pub caller: Option<(&'a str, &'a str)>,
    pub limit: Override,
    pub hits: u32,
}

/// The `ShouldRateLimit` call that counts `descriptors`.
pub(in crate::pipeline) fn call<'p>(
    service: &'p RateLimitServiceConfig,
    descriptors: &[Descriptor],
) -> ServiceCall<'p> {
    let entries: SmallVec<[Entries; 2]> = descriptors
        .iter()
        .map(|d| {
            let mut e = SmallVec::new();
            e.push(("bound", d.bound));
            e.extend(d.caller);
            e
        })
        .collect();
    let specs: SmallVec<[DescriptorSpec; 2]> = descriptors
        .iter()
        .zip(&entries)
        .map(|(d, e)| DescriptorSpec {
            entries: e,
            limit: Some(d.limit),
            hits_addend: u64::from(d.hits),
        })
        .collect();
    ServiceCall {
        cluster: &service.cluster,
        timeout_ms: service.timeout_ms,
        message: rls::encode_request(&service.domain, &specs),
    }
}

/// The call a request waits for.
#[derive(Debug, Clone)]
pub struct ServiceCall<'a> {
    pub cluster: &'a str,
    pub timeout_ms: u64,
    /// An encoded `RateLimitRequest`.
    pub message: Vec<u8>,
}

/// The service's answer with each count read under a rotation's other
/// secret (`statuses` past the first `also.len()`, one per `Some` in
/// `also`, in order) added to the same bound's count: one answer per bound,
/// as if one counter had been asked. The service answers OK at count ==
/// limit with 0 remaining and OVER_LIMIT above, for a read (hits 0) as for
/// a count: so a count is `limit - remaining` when OK, and over the limit
/// when not.
fn read_beside(
    mut statuses: Vec<rls::DescriptorAnswer>,
    also: &[Option<String>],
) -> Vec<rls::DescriptorAnswer> {
    if also.iter().all(Option::is_none) {
        return statuses;
    }
    let reads = statuses.split_off(also.len().min(statuses.len()));
    let mut reads = reads.into_iter();
    for (s, _) in statuses.iter_mut().zip(also).filter(|(_, a)| a.is_some()) {
        let Some(other) = reads.next() else {
            break;
        };
        let limit = s.limit.map_or(0, |l| l.requests_per_unit);
        let used = |a: &rls::DescriptorAnswer| match a.code {
            Code::OverLimit => limit.saturating_add(1),
            _ => limit.saturating_sub(a.remaining),
        };
        let total = used(s).saturating_add(used(&other));
        if total > limit {
            s.code = Code::OverLimit;
        }
        s.remaining = limit.saturating_sub(total);
        s.reset_s = s.reset_s.max(other.reset_s);
    }
    statuses
}

/// An installation bound of a request: the bound, its descriptor value and
/// its window.
#[derive(Clone, Copy)]
struct Service<'p> {
    id: BoundId,
    bound: &'p Bound,
    descriptor: &'p str,
    unit: Unit,
}

impl<'p> Service<'p> {
    fn of(route: &'p Route, id: BoundId) -> Option<Service<'p>> {
        let bound = route.bound(id)?;
        let (descriptor, unit) = bound.installation()?;
        Some(Service {
            id,
            bound,
            descriptor,
            unit,
        })
    }

    /// Its descriptor for `caller` (none for `per: route`), adding `hits`.
    fn descriptor<'a>(&self, caller: Option<&'a str>, hits: u32) -> Descriptor<'a>
    where
        'p: 'a,
    {
        Descriptor {
            bound: self.descriptor,
            caller: caller.map(|c| (self.bound.per.as_str(), c)),
            limit: Override {
                requests_per_unit: self.bound.rate.limit,
                unit: self.unit,
            },
            hits,
        }
    }

    /// The figures a client is shown for this bound.
    fn shown(&self, quota: Quota, style: crate::reply::Style) -> Shown<'p> {
        Shown {
            bound: &self.bound.name,
            unit: self.bound.cost.as_ref().map(|c| c.unit.as_str()),
            window_ms: self.unit.ms(),
            quota,
            style,
        }
    }
}

/// The installation bounds of `route` (and of its operation `op`) that
/// apply to this caller.
pub(in crate::pipeline) fn applying(
    route: &Route,
    op: Option<OpId>,
    identity: Option<&Identity>,
) -> SmallVec<[BoundId; 2]> {
    route
        .installation_bounds(op)
        .filter(|(_, b)| b.applies_to.admits(identity))
        .map(|(i, _)| i)
        .collect()
}

/// The descriptor value a caller is counted under for a bound keyed `per`
/// (the caller-key rule: [`caller_key`]), `v` or `n` for what named it.
fn caller_value(
    keys: (u64, u64),
    per: Per,
    value: Option<&str>,
    address: &str,
    prefixes: Prefixes,
) -> String {
    let (named, k) = caller_key::key128([keys.0, keys.1], per, value, address, prefixes);
    let tag = match named {
        Named::Value => 'v',
        Named::Network => 'n',
    };
    format!("{tag}{:016x}{:016x}", k.h1, k.h2)
}

impl<'p> Worker<'p> {
    /// Per installation bound of the request, what its caller is counted
    /// under (none for `per: route`) with the hashing keys `keys`.
    pub(in crate::pipeline) fn callers(
        &self,
        keys: (u64, u64),
        route: &Route,
        ready: &Flight,
    ) -> SmallVec<[Option<String>; 2]> {
        let lim = self.limiter;
        let id = ready.identity.as_ref();
        ready
            .bounds
            .iter()
            .filter_map(|&i| route.bound(i))
            .map(|b| {
                let value = match b.per {
                    Per::Route => return None,
                    Per::Account => ready.account.as_deref(),
                    per => caller_key::value_of(per, id, ready.pending.model()),
                };
                Some(caller_value(
                    keys,
                    b.per,
                    value,
                    &ready.address,
                    lim.plan.client_address,
                ))
            })
            .collect()
    }

    /// The installation bounds of the request, each with its caller's key.
    fn bounds_of<'r>(
        &self,
        route: &'p Route,
        ready: &'r Flight,
    ) -> SmallVec<[(Service<'p>, Option<&'r str>); 2]> {
        ready
            .bounds
            .iter()
            .zip(&ready.callers)
            .filter_map(|(&i, c)| Some((Service::of(route, i)?, c.as_deref())))
            .collect()
    }

    /// Refused without a call if an enforcing bound's caller is locked.
    pub(in crate::pipeline) fn locked<H: Host>(
        &self,
        host: &mut H,
        route: &'p Route,
        ready: &Flight,
    ) -> Option<Decision<'p>> {
        let plan = &self.limiter.plan;
        let now = host.now_ms();
        for (b, caller) in self.bounds_of(route, ready) {
            if b.bound.shadow {
                continue;
            }
            let id = lock_id(self.limiter.service_keys, &b, caller);
            let until =
                match locks::until(host.store(), &locks::slot_key(&plan.instance, id), id, now) {
                    // Locked, but this refusal is spared (`enforce_percent`):
                    // the service counts it, and this bound lets it through.
                    Ok(Some(_)) if self.limiter.spared(&ready.pending, b.id, b.bound) => continue,
                    Ok(Some(until)) => until,
                    Ok(None) => continue,
                    // Not known to be locked: the service decides.
                    Err(e) => {
                        host.count(Stat::StoreErrors);
                        host.log(Level::Warn, &format!("ratebound: lock table: {e}"));
                        continue;
                    }
                };
            host.count(Stat::RlsCallsSaved);
            host.record(
                ready.pending.route(),
                &[BoundEvent::new(b.id, Event::Refused, false)],
            );
            let quota = Quota {
                limit: b.bound.rate.limit,
                remaining: 0,
                reset_ms: until.saturating_sub(now),
            };
            return Some(Decision::Refuse {
                route: &route.name,
                shown: b.shown(quota, plan.style),
            });
        }
        None
    }

    /// The `ShouldRateLimit` call for a request: one descriptor per bound,
    /// `[("bound", "<route>.<bound>"), (<per>, <caller>)]`, with the limit
    /// sent as an override so the service counts the number this filter
    /// was configured with, and `hits_addend` the units the request takes
    /// (1, or a cost bound's reservation or named cost).
    ///
    /// During a key rotation, after them, one more per bound keyed by a
    /// caller: the caller under the other secret, with `hits_addend` 0
    /// (read, not counted), in the same call.
    pub(in crate::pipeline) fn service_call(
        &self,
        route: &'p Route,
        ready: &Flight,
    ) -> Option<ServiceCall<'p>> {
        let service: &'p RateLimitServiceConfig = self.limiter.plan.service.as_ref()?;
        let bounds = self.bounds_of(route, ready);
        let mut descriptors: SmallVec<[Descriptor; 2]> = bounds
            .iter()
            .map(|(b, caller)| b.descriptor(*caller, ready.pending.hits(b.id, b.bound)))
            .collect();
        descriptors.extend(
            bounds
                .iter()
                .zip(&ready.also)
                .filter_map(|((b, _), also)| Some(b.descriptor(Some(also.as_deref()?), 0))),
        );
        Some(call(service, &descriptors))
    }

    /// Remembers every enforcing bound whose caller the answer shows at or
    /// over its limit: locked until its window ends.
    fn remember_locks<H: Host>(
        &self,
        host: &mut H,
        route: &'p Route,
        ready: &Flight,
        statuses: &[rls::DescriptorAnswer],
        now: u64,
    ) {
        let instance = &self.limiter.plan.instance;
        for ((b, caller), s) in self.bounds_of(route, ready).into_iter().zip(statuses) {
            let full = s.code == Code::OverLimit || s.remaining == 0;
            let Some(reset_s) = s.reset_s.filter(|_| full && !b.bound.shadow) else {
                continue;
            };
            // The service's horizon is whole seconds, rounded up: the clock
            // window's end is the sharper of the two.
            let window = b.unit.ms();
            let end = (now / window + 1) * window;
            let until = end.min(now.saturating_add(reset_s.saturating_mul(1_000)));
            let id = lock_id(self.limiter.service_keys, &b, caller);
            if let Err(e) =
                locks::lock(host.store(), &locks::slot_key(instance, id), id, until, now)
            {
                host.count(Stat::StoreErrors);
                host.log(Level::Warn, &format!("ratebound: lock table: {e}"));
            }
        }
    }

    /// The service answered (or failed: `grpc_status` non-zero): refuse
    /// with its figures, or commit the node bounds and pass.
    pub(in crate::pipeline) fn counted<H: Host>(
        &self,
        host: &mut H,
        r: RouteLanes<'p>,
        ready: Flight,
        grpc_status: u32,
        body: Option<Vec<u8>>,
    ) -> Decision<'p> {
        let plan = &self.limiter.plan;
        let now = host.now_ms();
        host.service_latency(now.saturating_sub(ready.sent_ms));
        let route = r.route;
        let bounds: SmallVec<[Service<'p>; 2]> = ready
            .bounds
            .iter()
            .filter_map(|&i| Service::of(route, i))
            .collect();
        let read = ready.also.iter().flatten().count();
        let answer = match rls::outcome(grpc_status, body.as_deref(), bounds.len() + read) {
            rls::CallOutcome::Error(e) => return self.service_failed(host, r, ready, &e),
            rls::CallOutcome::Admit { statuses } | rls::CallOutcome::Refuse { statuses, .. } => {
                statuses
            }
        };
        // Every descriptor went with a limit: one answered without is a
        // service that does not know the domain, and counted nothing.
        if let Some(descriptor) = answer.iter().position(|s| s.limit.is_none()) {
            host.count(Stat::RlsNoLimit);
            return self.service_failed(host, r, ready, &RlsError::NoLimit { descriptor });
        }
        let answer = read_beside(answer, &ready.also);
        self.remember_locks(host, route, &ready, &answer, now);
        // The first enforcing bound over its limit refuses; shadow bounds
        // over theirs only say so.
        let mut events: SmallVec<[BoundEvent; 2]> = SmallVec::new();
        let mut refused = None;
        let mut tightest: Option<(Service<'p>, Quota)> = None;
        for (b, s) in bounds.iter().zip(&answer) {
            let reset_ms = s.reset_s.unwrap_or(1).saturating_mul(1_000);
            let quota = Quota {
                limit: b.bound.rate.limit,
                remaining: if s.code == Code::OverLimit {
                    0
                } else {
                    s.remaining
                },
                reset_ms,
            };
            let over = s.code == Code::OverLimit;
            let spared = over && self.limiter.spared(&ready.pending, b.id, b.bound);
            let event = match (over, spared, refused.is_some()) {
                (true, false, false) => {
                    refused = Some((*b, quota));
                    Event::Refused
                }
                (true, true, _) => Event::WouldRefuse,
                _ => Event::Allowed,
            };
            if refused.is_none() && tightest.is_none_or(|(_, t)| quota.remaining < t.remaining) {
                tightest = Some((*b, quota));
            }
            events.push(BoundEvent::new(b.id, event, false));
        }
        if let Some((b, quota)) = refused {
            // Only the refusing bound's event: the others' counts are the
            // service's, and this request is counted by no node bound.
            events.retain(|e| e.event == Event::Refused || e.event == Event::WouldRefuse);
            host.record(r.id, &events);
            return Decision::Refuse {
                route: &route.name,
                shown: b.shown(quota, plan.style),
            };
        }
        host.record(r.id, &events);
        self.mark_would_refuse(host, route, &events);
        // Costs the response names are owed to the service beyond what
        // was sent.
        let owed: Receipts = bounds
            .iter()
            .zip(&ready.callers)
            .filter(|(b, _)| b.bound.cost.as_ref().is_some_and(|c| c.from_response()))
            .map(|(b, caller)| {
                let hits = ready.pending.hits(b.id, b.bound);
                let caller = caller.clone();
                (b.id, Receipt::Service { caller, hits })
            })
            .collect();
        let mut d = self.limiter.commit(host.store(), r, ready.pending, now);
        if d.refused.is_none() {
            d.receipts.extend(owed);
        }
        let tighter = |shown: Option<Shown<'p>>| match tightest {
            Some((b, quota))
                if plan.success_headers
                    && shown
                        .as_ref()
                        .is_none_or(|s| quota.remaining < s.quota.remaining) =>
            {
                Some(b.shown(quota, plan.style))
            }
            _ => shown,
        };
        match self.conclude(host, r, d) {
            Decision::Pass(shown) => Decision::Pass(tighter(shown)),
            Decision::Charging(shown, charges) => Decision::Charging(tighter(shown), charges),
            d => d,
        }
    }

    /// No answer from the service: logged and counted per bound; `deny`
    /// answers 503, `allow` commits the node bounds and passes.
    pub(in crate::pipeline) fn service_failed<H: Host>(
        &self,
        host: &mut H,
        r: RouteLanes<'p>,
        ready: Flight,
        why: &dyn std::fmt::Display,
    ) -> Decision<'p> {
        let plan = &self.limiter.plan;
        let route = r.route;
        let events: SmallVec<[BoundEvent; 2]> = ready
            .bounds
            .iter()
            .map(|&i| BoundEvent::new(i, Event::ServiceError, false))
            .collect();
        host.record(r.id, &events);
        if let Some(held) = self.quiet.pass(host.now_ms()) {
            let more = match held {
                0 => String::new(),
                n => format!(" ({n} more failed since the last message)"),
            };
            host.log(
                Level::Warn,
                &format!(
                    "ratebound: rate-limit service call for route {} failed: {why}{more}",
                    route.name
                ),
            );
        }
        let deny = plan
            .service
            .as_ref()
            .is_none_or(|s| s.on_error == ServiceOnError::Deny);
        let first = ready.bounds.first().and_then(|&i| route.bound(i));
        match first {
            Some(b) if deny => Decision::Unchecked {
                route: &route.name,
                bound: &b.name,
            },
            _ => {
                let now = host.now_ms();
                let d = self.limiter.commit(host.store(), r, ready.pending, now);
                self.conclude(host, r, d)
            }
        }
    }
}

/// A lock's name: the bound (its descriptor, limit and window) and the
/// caller, hashed with the service keys.
fn lock_id(keys: (u64, u64), b: &Service, caller: Option<&str>) -> u64 {
    let mut h = SipHasher13::new_with_keys(keys.1, keys.0);
    h.write(b.descriptor.as_bytes());
    h.write_u8(0xff);
    h.write(caller.unwrap_or_default().as_bytes());
    h.write_u32(b.bound.rate.limit);
    h.write_u64(b.unit.ms());
    h.finish128().h1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caller_values_never_collide_across_kinds_or_fallbacks() {
        let k = rls::service_keys("shop", None);
        let p = Prefixes::default();
        let alice = caller_value(k, Per::Account, Some("alice"), "10.0.0.1", p);
        assert_eq!(
            alice,
            caller_value(k, Per::Account, Some("alice"), "10.9.9.9", p)
        );
        assert!(alice.starts_with('v') && alice.len() == 33);
        assert_ne!(
            alice,
            caller_value(k, Per::User, Some("alice"), "10.0.0.1", p)
        );
        let fallback = caller_value(k, Per::Account, None, "10.0.0.1", p);
        assert!(fallback.starts_with('n'));
        assert_ne!(fallback, caller_value(k, Per::Account, None, "10.0.0.2", p));
        assert_ne!(
            alice,
            caller_value(
                rls::service_keys("other", None),
                Per::Account,
                Some("alice"),
                "",
                p
            )
        );
        assert!(!alice.contains("alice"));
    }
}

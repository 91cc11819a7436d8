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
//! A sliding bound (the default) sends four descriptors: its attempts in
//! the current clock window, adding the request, and, read, the previous
//! window's and both windows' refunds; the filter decides with the
//! two-window estimate, as node bounds do. The service counts every call,
//! so an attempt the estimate refuses is refunded (queued, sent at the
//! root's next tick). No limit of the service's backs the estimate up: it
//! would count refunded attempts. A fixed bound sends one descriptor and
//! the service decides.
//!
//! A caller the service's counts show at their limit is remembered in
//! shared data ([`crate::count::locks`]) and refused here without a call
//! until they would admit again: the clock window's end (fixed), or when
//! the estimate admits (sliding).

use crate::config::plan::{Bound, BoundId, OpId, Route};
use crate::config::Unit;
use crate::config::{Per, RateLimitServiceConfig, ServiceOnError, Shape};
use crate::count::locks;
use crate::count::window::{Counts, Quota, Rate, Verdict};
use crate::identity::address::Prefixes;
use crate::identity::Identity;
use crate::pipeline::caller_key::{self, Named};
use crate::pipeline::flight::Flight;
use crate::pipeline::limiter::{BoundEvent, Event, Receipt, Receipts, RouteLanes};
use crate::pipeline::owed;
use crate::pipeline::{Decision, Host, Level, Worker};
use crate::reply::Shown;
use crate::rls::{self, Code, DescriptorSpec, Override, RlsError};
use crate::stats::Stat;
use siphasher::sip128::{Hasher128, SipHasher13};
use smallvec::SmallVec;
use std::hash::Hasher;

/// A descriptor's entries: `bound`, the caller's key unless `per: route`,
/// and a sliding bound's window.
type Entries<'a> = SmallVec<[(&'a str, &'a str); 3]>;

/// The limit a sliding bound's descriptors are sent with: the service
/// answers `READ - count` remaining, so each answer gives the exact count,
/// and never refuses (the estimate decides).
const READ: u32 = u32::MAX;

/// The entry naming a sliding bound's window: its attempts' count.
pub(in crate::pipeline) const WINDOW: &str = "window";
/// The entry naming a sliding bound's window: its refunds' count.
pub(in crate::pipeline) const REFUNDED: &str = "refunded";

/// One descriptor of a call to the service: counted under
/// `[("bound", bound), (per, caller), (window entry, index)]` (no caller
/// for `per: route`, no window for a fixed bound), with the limit sent as
/// an override, adding `hits`.
pub(in crate::pipeline) struct Descriptor<'a> {
    pub bound: &'a str,
    pub caller: Option<(&'a str, &'a str)>,
    /// A sliding bound's count: [`WINDOW`] or [`REFUNDED`], and the
    /// window's index on the clock of the bound's unit.
    pub window: Option<(&'static str, u64)>,
    pub limit: Override,
    pub hits: u32,
}

/// The `ShouldRateLimit` call that counts `descriptors`.
pub(in crate::pipeline) fn call<'p>(
    service: &'p RateLimitServiceConfig,
    descriptors: &[Descriptor],
) -> ServiceCall<'p> {
    let windows: SmallVec<[Option<(&str, String)>; 4]> = descriptors
        .iter()
        .map(|d| d.window.map(|(k, n)| (k, n.to_string())))
        .collect();
    let entries: SmallVec<[Entries; 4]> = descriptors
        .iter()
        .zip(&windows)
        .map(|(d, w)| {
            let mut e = SmallVec::new();
            e.push(("bound", d.bound));
            e.extend(d.caller);
            e.extend(w.as_ref().map(|(k, n)| (*k, n.as_str())));
            e
        })
        .collect();
    let specs: SmallVec<[DescriptorSpec; 4]> = descriptors
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

/// What one installation bound's answers say of a request: refused or
/// not, the figures the client is shown, and until when its caller is
/// locked (refused on this node without a call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Judged {
    over: bool,
    quota: Quota,
    lock_until: Option<u64>,
    /// A sliding bound's window the request was counted in.
    window: Option<u64>,
}

/// A count the service gave for a descriptor sent with `limit`: it
/// answers OK at count == limit with 0 remaining and OVER_LIMIT above, for
/// a read (hits 0) as for a count; so a count is `limit - remaining` when
/// OK, and over the limit (at least `limit + 1`) when not.
fn count_of(a: &rls::DescriptorAnswer, limit: u32) -> u32 {
    match a.code {
        Code::OverLimit => limit.saturating_add(1),
        _ => limit.saturating_sub(a.remaining),
    }
}

/// An installation bound of a request: the bound, its descriptor value,
/// its window and its shape.
#[derive(Clone, Copy)]
struct Service<'p> {
    id: BoundId,
    bound: &'p Bound,
    descriptor: &'p str,
    unit: Unit,
    shape: Shape,
}

impl<'p> Service<'p> {
    fn of(route: &'p Route, id: BoundId) -> Option<Service<'p>> {
        let bound = route.bound(id)?;
        let (descriptor, unit, shape) = bound.installation()?;
        Some(Service {
            id,
            bound,
            descriptor,
            unit,
            shape,
        })
    }

    fn rate(&self) -> Rate {
        Rate {
            limit: self.bound.rate.limit,
            window_ms: self.unit.ms(),
        }
    }

    /// How many answers its descriptors get: one (fixed) or four (sliding:
    /// this window's and the previous one's attempts and refunds), and as
    /// many again under a rotation's other secret (`also`).
    fn answers(&self, also: bool) -> usize {
        let windows = match self.shape {
            Shape::Sliding => 4,
            Shape::Fixed => 1,
        };
        windows * (1 + usize::from(also))
    }

    /// Its descriptors for a request sent at `now` by `caller` (none for
    /// `per: route`), in the order [`Service::judge`] reads their answers.
    /// Fixed: the count adding `hits`, with the bound's limit (the service
    /// decides). Sliding: this window's attempts adding `hits`, and read
    /// (hits 0) the previous window's attempts and both windows' refunds
    /// (attempts counted, then refused: [`owed::ChargeAt::Refund`]). Then
    /// the same, read, for the caller under a rotation's other secret
    /// (`also`). A sliding bound's counts carry their window's index and
    /// are keyed by the unit that spans the window and its successor
    /// ([`Unit::keeping`]), so the next window reads back what this one
    /// counted.
    fn descriptors<'a>(
        &self,
        (caller, also): (Option<&'a str>, Option<&'a str>),
        hits: u32,
        now: u64,
        out: &mut SmallVec<[Descriptor<'a>; 4]>,
    ) where
        'p: 'a,
    {
        let per = self.bound.per.as_str();
        let limit = self.bound.rate.limit;
        let one = |caller: Option<&'a str>, window: Option<(&'static str, u64)>, limit, hits| {
            let unit = window.map_or(self.unit, |(_, w)| self.unit.keeping(w));
            Descriptor {
                bound: self.descriptor,
                caller: caller.map(|c| (per, c)),
                window,
                limit: Override {
                    requests_per_unit: limit,
                    unit,
                },
                hits,
            }
        };
        match self.shape {
            Shape::Fixed => {
                out.push(one(caller, None, limit, hits));
                if let Some(also) = also {
                    out.push(one(Some(also), None, limit, 0));
                }
            }
            Shape::Sliding => {
                let win = now / self.unit.ms();
                let prev = win.saturating_sub(1);
                let counts = [
                    (WINDOW, win),
                    (WINDOW, prev),
                    (REFUNDED, win),
                    (REFUNDED, prev),
                ];
                for (i, w) in counts.into_iter().enumerate() {
                    out.push(one(caller, Some(w), READ, if i == 0 { hits } else { 0 }));
                }
                if let Some(also) = also {
                    for w in counts {
                        out.push(one(Some(also), Some(w), READ, 0));
                    }
                }
            }
        }
    }

    /// What this bound's `answers` (from [`Service::descriptors`], for a
    /// request of `hits` sent at `sent`) say at `now`.
    ///
    /// Fixed: the service's count of the clock window decides, a count
    /// under the other secret added to it; a caller at or over the limit
    /// is locked until the window ends. A refusal stays counted there, as
    /// the service counts every call; the window's end forgets it.
    ///
    /// Sliding: the two-window estimate over the service's counts decides
    /// ([`Rate::decide_hits`], the node bounds' arithmetic, as of `sent`),
    /// each window's count its attempts less its refunds. A caller the
    /// estimate leaves nothing is locked until it admits again, so its
    /// next attempts on this node are refused without a call; a refused
    /// attempt, which the service has counted, is refunded (`window`).
    fn judge(&self, answers: &[rls::DescriptorAnswer], hits: u32, sent: u64, now: u64) -> Judged {
        let limit = self.bound.rate.limit;
        let read = |i: usize, limit: u32| answers.get(i).map_or(0, |a| count_of(a, limit));
        match self.shape {
            Shape::Fixed => {
                let count = read(0, limit).saturating_add(read(1, limit));
                let reset_s = answers.iter().filter_map(|a| a.reset_s).max();
                let over = count > limit;
                let remaining = if over { 0 } else { limit - count };
                // The service's horizon is whole seconds, rounded up: the
                // clock window's end is the sharper of the two.
                let window = self.unit.ms();
                let end = (now / window + 1) * window;
                let lock_until = reset_s
                    .filter(|_| remaining == 0)
                    .map(|s| end.min(now.saturating_add(s.saturating_mul(1_000))));
                Judged {
                    over,
                    quota: Quota {
                        limit,
                        remaining,
                        reset_ms: reset_s.unwrap_or(1).saturating_mul(1_000),
                    },
                    lock_until,
                    window: None,
                }
            }
            Shape::Sliding => {
                // Attempts less refunds, per window, under both secrets.
                let net = |attempts: usize, refunds: usize| {
                    let under =
                        |k: usize| read(attempts + k, READ).saturating_sub(read(refunds + k, READ));
                    under(0).saturating_add(under(4))
                };
                let win = sent / self.unit.ms();
                let before = Counts {
                    win,
                    cur: net(0, 2).saturating_sub(hits),
                    prev: net(1, 3),
                };
                let rate = self.rate();
                let (over, quota) = match rate.decide_hits(before, sent, hits) {
                    Verdict::Admit { quota, .. } => (false, quota),
                    Verdict::Refuse { quota } => (true, quota),
                };
                let until = sent.saturating_add(quota.reset_ms);
                Judged {
                    over,
                    quota: Quota {
                        reset_ms: until.saturating_sub(now).max(1),
                        ..quota
                    },
                    lock_until: (quota.remaining == 0).then_some(until),
                    window: Some(win),
                }
            }
        }
    }

    /// The refund of a request this bound counted in `window` and that was
    /// refused, by it or by another bound.
    fn refund(&self, caller: Option<&str>, window: u64, hits: u32) -> owed::Charge {
        owed::Charge {
            descriptor: self.descriptor.to_string(),
            caller: caller.map(|c| (self.bound.per.as_str(), c.to_string())),
            limit: Override {
                requests_per_unit: READ,
                unit: self.unit,
            },
            at: owed::ChargeAt::Refund(window),
            units: hits,
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
    tagged_hex(tag, k.h1, k.h2)
}

/// `{tag}{h1:016x}{h2:016x}`, written digit by digit: the same key
/// `format!` writes (`tagged_hex_is_the_one_format_writes`), without its
/// machinery on every sign-in.
fn tagged_hex(tag: char, h1: u64, h2: u64) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(33);
    out.push(tag);
    for h in [h1, h2] {
        for shift in (0..16).rev() {
            let nibble = (h >> (shift * 4)) & 0xf;
            out.push(char::from(
                DIGITS.get(nibble as usize).copied().unwrap_or(b'0'),
            ));
        }
    }
    out
}

#[cfg(test)]
mod hex_tests {
    #[test]
    fn tagged_hex_is_the_one_format_writes() {
        let mut seeds: Vec<u64> = vec![0, 1, 0xf, 0x10, u64::MAX, u64::MAX - 1, 1 << 63];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            seeds.push(x);
            seeds.push(x >> (x % 64));
        }
        for (&h1, &h2) in seeds.iter().zip(seeds.iter().rev()) {
            for tag in ['v', 'n'] {
                assert_eq!(
                    super::tagged_hex(tag, h1, h2),
                    format!("{tag}{h1:016x}{h2:016x}")
                );
            }
        }
    }
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
        now: u64,
    ) -> Option<Decision<'p>> {
        let plan = &self.limiter.plan;
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

    /// The `ShouldRateLimit` call for a request: per bound, its
    /// descriptors ([`Service::descriptors`]) under
    /// `[("bound", "<route>.<bound>"), (<per>, <caller>)]` (and a sliding
    /// bound's `("window", <index>)`), with the limit sent as an override
    /// so the service counts the number this filter was configured with,
    /// and `hits_addend` the units the request takes (1, or a cost bound's
    /// reservation or named cost); reads (hits 0) beside it, in the same
    /// call.
    pub(in crate::pipeline) fn service_call(
        &self,
        route: &'p Route,
        ready: &Flight,
    ) -> Option<ServiceCall<'p>> {
        let service: &'p RateLimitServiceConfig = self.limiter.plan.service.as_ref()?;
        let mut descriptors: SmallVec<[Descriptor; 4]> = SmallVec::new();
        let also = ready
            .also
            .iter()
            .map(Option::as_deref)
            .chain(std::iter::repeat(None));
        for ((b, caller), also) in self.bounds_of(route, ready).into_iter().zip(also) {
            let hits = ready.pending.hits(b.id, b.bound);
            b.descriptors((caller, also), hits, ready.sent_ms, &mut descriptors);
        }
        Some(call(service, &descriptors))
    }

    /// Locks every enforcing bound's caller its judgement locks.
    fn remember_locks<H: Host>(
        &self,
        host: &mut H,
        route: &'p Route,
        ready: &Flight,
        judged: &[Judged],
        now: u64,
    ) {
        let instance = &self.limiter.plan.instance;
        for ((b, caller), j) in self.bounds_of(route, ready).into_iter().zip(judged) {
            let Some(until) = j.lock_until.filter(|_| !b.bound.shadow) else {
                continue;
            };
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
        let also = |i: usize| ready.also.get(i).is_some_and(Option::is_some);
        let sent: usize = bounds
            .iter()
            .enumerate()
            .map(|(i, b)| b.answers(also(i)))
            .sum();
        let answer = match rls::outcome(grpc_status, body.as_deref(), sent) {
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
        let mut rest = answer.as_slice();
        let judged: SmallVec<[Judged; 2]> = bounds
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let (mine, after) = rest.split_at(b.answers(also(i)).min(rest.len()));
                rest = after;
                let hits = ready.pending.hits(b.id, b.bound);
                b.judge(mine, hits, ready.sent_ms, now)
            })
            .collect();
        self.remember_locks(host, route, &ready, &judged, now);
        // What each sliding bound gives back if the request ends refused
        // (or let through over it): the service has counted it there.
        let refunds: SmallVec<[(bool, owed::Charge); 2]> = bounds
            .iter()
            .zip(&judged)
            .zip(&ready.callers)
            .filter_map(|((b, j), caller)| {
                let hits = ready.pending.hits(b.id, b.bound);
                Some((j.over, b.refund(caller.as_deref(), j.window?, hits)))
            })
            .collect();
        // The first enforcing bound over its limit refuses; shadow bounds
        // over theirs only say so.
        let mut events: SmallVec<[BoundEvent; 2]> = SmallVec::new();
        let mut refused = None;
        let mut tightest: Option<(Service<'p>, Quota)> = None;
        for (b, j) in bounds.iter().zip(&judged) {
            let (over, quota) = (j.over, j.quota);
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
            // service's, and this request is counted by no node bound, and
            // by no sliding bound once refunded.
            events.retain(|e| e.event == Event::Refused || e.event == Event::WouldRefuse);
            host.record(r.id, &events);
            self.give_back(refunds.iter().map(|(_, c)| c));
            return Decision::Refuse {
                route: &route.name,
                shown: b.shown(quota, plan.style),
            };
        }
        host.record(r.id, &events);
        self.mark_would_refuse(host, route, &events);
        // Let through over a shadow bound or a spared refusal: not counted
        // by that bound, as a node bound's.
        self.give_back(refunds.iter().filter(|(over, _)| *over).map(|(_, c)| c));
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
        } else {
            // A node bound refused at its commit (another worker took its
            // last): counted by no sliding bound either.
            self.give_back(refunds.iter().filter(|(over, _)| !*over).map(|(_, c)| c));
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

    /// Queues `refunds` for the root context's next tick (docs: at most a
    /// second): until then the refused attempts weigh in every node's
    /// estimate.
    fn give_back<'c>(&self, refunds: impl Iterator<Item = &'c owed::Charge>) {
        if let Ok(mut queue) = self.owed.try_borrow_mut() {
            for c in refunds {
                queue.push(c.clone());
            }
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
    h.write(b.shape.as_str().as_bytes());
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

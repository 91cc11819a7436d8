//! The background half of fleet bounds: every `sync_ms`, one root context
//! per node (it holds the lease in the node's [`Record`]) takes the unsent
//! hits of every key its fleet lanes track ([`fleet_lane::take`]), sends
//! them to the rate-limit service in `ShouldRateLimit` calls of at most
//! [`MAX_DESCRIPTORS`], and puts each answer's fleet count back
//! ([`settle`]). No request waits for any of it.
//!
//! Each key is a descriptor `[("bound", "<route>.<bound>"), (<per>,
//! "f<fleet key>")]` (`per: route`: the bound alone; a keyed lane's
//! overflow counter: `(<per>, "overflow")`), with `hits_addend` the hits
//! this node admitted since its last sync (0 reads) and a limit override of
//! [`WIDE`] × the limit, so that counts above the limit are read (the
//! override is not part of the service's key). The first call of a sync
//! carries the heartbeat descriptor the nodes are counted with.

use crate::config::plan::{BoundId, Plan, RouteId};
use crate::config::Unit;
use crate::count::fleet::{Beat, Failure, Record};
use crate::count::fleet_lane::{self, Candidate, SyncOutcome, Taken};
use crate::count::lane::LanePlace;
use crate::count::store::{update, Store, StoreError};
use crate::pipeline::limiter::Limiter;
use crate::rls::{self, DescriptorSpec, GrpcCode, Override, RlsError};

use crate::pipeline::phase::service::ServiceCall;

/// Descriptors per call: the real service answered 200 in one piece
/// (docs/fleet.md).
pub(crate) const MAX_DESCRIPTORS: usize = 200;

/// Keys per sync, at most: 5 calls' worth. Past it, keys go by need (unsent hits
/// first, then the longest unanswered): a spray of junk keys cannot make
/// the sync outlast its period (timeouts) nor push a busy key out.
pub(crate) const MAX_SYNC_KEYS: usize = 5 * MAX_DESCRIPTORS;

/// The override is this multiple of the limit: a count up to it is read
/// as it is (above the limit, a node needs no more than that to refuse).
pub(crate) const WIDE: u32 = 4;

/// The heartbeat's override: far more nodes than any fleet has.
const BEAT_LIMIT: u32 = 1_000_000;

/// One call of a sync, and what its answer is for.
#[derive(Debug, Clone)]
pub struct Batch {
    /// An encoded `RateLimitRequest`.
    pub message: Vec<u8>,
    /// Each key's descriptor, in order after the heartbeat if there is one:
    /// its route, its bound and what was taken.
    items: Vec<(RouteId, BoundId, Taken)>,
    /// The heartbeat led the call: its descriptor, and this node's own key
    /// after it when asked.
    heartbeat: Option<Beat>,
    pub sent_ms: u64,
}

impl Batch {
    /// Keys it carries (the heartbeat not counted).
    pub fn keys(&self) -> usize {
        self.items.len()
    }

    /// Descriptors before the keys: the heartbeat's.
    fn lead(&self) -> usize {
        self.heartbeat.map_or(0, |b| 1 + usize::from(b.own_key()))
    }

    /// As the host sends it; the message moves into the call (it is sent
    /// once, and only the items are needed for the answer).
    pub fn call<'p>(&mut self, plan: &'p Plan) -> Option<ServiceCall<'p>> {
        let service = plan.service.as_ref()?;
        Some(ServiceCall {
            cluster: &service.cluster,
            timeout_ms: service.sync_timeout_ms(),
            message: std::mem::take(&mut self.message),
        })
    }
}

/// The heartbeat descriptor of an instance.
fn heartbeat_of(instance: &str) -> [(&'static str, &str); 2] {
    [("ratebound", "nodes"), ("instance", instance)]
}

/// A node's own key: the same for every run of the node (`node` is its
/// stable id), so a restart finds its 1 already added.
fn node_key_of<'a>(instance: &'a str, node: &'a str) -> [(&'static str, &'a str); 3] {
    [
        ("ratebound", "node"),
        ("instance", instance),
        ("node", node),
    ]
}

/// How long a lease holds: three ticks of a sync, and at least the 1 s
/// tick, so a live holder renews it well before it runs out.
pub(crate) fn lease_ms(sync_ms: u64) -> u64 {
    3 * sync_ms.max(1_000)
}

/// Claims (or renews) the sync for `me`, a root context whose
/// configuration is generation `gen`, at `now`: `Some(record)` when this
/// context is the node's syncing one.
pub fn claim<S: Store + ?Sized>(
    store: &S,
    limiter: &Limiter,
    (me, gen): (u64, u64),
    now_ms: u64,
) -> Result<Option<Record>, StoreError> {
    let (Some(f), Some(service)) = (&limiter.fleet, &limiter.plan.service) else {
        return Ok(None);
    };
    update(store, &f.record_key, |v| {
        let r = v.and_then(Record::decode).unwrap_or_default();
        match r.claim(me, gen, now_ms, lease_ms(service.sync_ms)) {
            Some(mine) => (Some(mine.encode()), Some(mine)),
            None => (None, None),
        }
    })
}

/// Takes every fleet lane's unsent hits at `now` and cuts them into calls:
/// at most [`MAX_SYNC_KEYS`] keys, by need. `node` is this node's stable id
/// (the heartbeat's own key). Call only as the lease holder ([`claim`]). A
/// lane the store fails for is skipped (its error returned beside the calls).
pub fn collect<S: Store + ?Sized>(
    store: &S,
    limiter: &Limiter,
    record: &Record,
    node: &str,
    now_ms: u64,
) -> (Vec<Batch>, Vec<StoreError>) {
    let mut errors = Vec::new();
    let Some(service) = &limiter.plan.service else {
        return (Vec::new(), errors);
    };
    // Which keys: every lane's candidates, the neediest first.
    let mut wanted: Vec<(RouteId, BoundId, Candidate)> = Vec::new();
    for (r, b, bound, lane) in limiter.bound_lanes() {
        if bound.fleet().is_none() {
            continue;
        }
        match fleet_lane::scan(store, lane, now_ms) {
            Ok(c) => wanted.extend(c.into_iter().map(|c| (r, b, c))),
            Err(e) => errors.push(e),
        }
    }
    wanted.sort_by_key(|(_, _, c)| c.order());
    wanted.truncate(MAX_SYNC_KEYS);
    let mut items = Vec::with_capacity(wanted.len());
    // Lane by lane (settle takes a lane's keys together), in the order of
    // their neediest key. Every key wanted goes out in this sync, so the
    // order within a lane (its buckets') is of no matter.
    let mut lanes: Vec<(RouteId, BoundId)> = wanted.iter().map(|(r, b, _)| (*r, *b)).collect();
    lanes.dedup();
    let mut seen = Vec::new();
    lanes.retain(|l| {
        let new = !seen.contains(l);
        seen.push(*l);
        new
    });
    for (r, b) in lanes {
        let Some(lane) = limiter.lane(r, b) else {
            continue;
        };
        let these: Vec<Candidate> = wanted
            .iter()
            .filter(|(r2, b2, _)| (*r2, *b2) == (r, b))
            .map(|(_, _, c)| *c)
            .collect();
        match fleet_lane::take_these(store, lane, &these, now_ms) {
            Ok(taken) => items.extend(taken.into_iter().map(|t| (r, b, t))),
            Err(e) => errors.push(e),
        }
    }
    let beat = record.beat(now_ms);
    let mut batches = Vec::new();
    let mut rest = items.as_slice();
    let mut first = true;
    while first || !rest.is_empty() {
        let heartbeat = first.then_some(beat);
        let room = MAX_DESCRIPTORS - heartbeat.map_or(0, |b| 1 + usize::from(b.own_key()));
        let (these, more) = rest.split_at(room.min(rest.len()));
        rest = more;
        first = false;
        batches.push(Batch {
            message: encode(limiter, &service.domain, these, heartbeat, node),
            items: these.to_vec(),
            heartbeat,
            sent_ms: now_ms,
        });
    }
    (batches, errors)
}

/// A key's descriptor value: the fleet's key, or the overflow counter.
fn key_value(t: &Taken) -> String {
    match t.place {
        LanePlace::Single => "overflow".to_string(),
        LanePlace::Bucket(_) => format!("f{:016x}", t.fleet_id),
    }
}

fn encode(
    limiter: &Limiter,
    domain: &str,
    items: &[(RouteId, BoundId, Taken)],
    heartbeat: Option<Beat>,
    node: &str,
) -> Vec<u8> {
    let plan = &limiter.plan;
    let beat_entries = heartbeat.map(|_| heartbeat_of(&plan.instance));
    let node_entries = node_key_of(&plan.instance, node);
    // One descriptor per item, whatever happens: the answer's statuses are
    // matched to the items by position. (Every item's bound is a fleet
    // bound with a validated window: the fallbacks are never taken.)
    let owned: Vec<_> = items
        .iter()
        .map(|(r, b, t)| {
            let bound = plan.route(*r).and_then(|x| x.bound(*b));
            let keyed = limiter.lane(*r, *b).is_some_and(|l| l.table.is_some());
            let per = bound.map_or("route", |b| b.per.as_str());
            (
                bound.and_then(|b| b.fleet()).unwrap_or(""),
                keyed.then(|| (per, key_value(t))),
                bound.map_or(0, |b| b.rate.limit),
                bound
                    .and_then(|b| Unit::of_ms(b.rate.window_ms))
                    .unwrap_or(Unit::Minute),
                t.sent.hits,
            )
        })
        .collect();
    let entries: Vec<Vec<(&str, &str)>> = owned
        .iter()
        .map(|(d, key, _, _, _)| {
            let mut e = vec![("bound", *d)];
            if let Some((per, v)) = key {
                e.push((*per, v.as_str()));
            }
            e
        })
        .collect();
    let mut specs = Vec::with_capacity(owned.len() + 1);
    if let (Some(beat), Some(e)) = (heartbeat, &beat_entries) {
        specs.push(DescriptorSpec {
            entries: e,
            limit: Some(Override {
                requests_per_unit: BEAT_LIMIT,
                unit: Unit::Minute,
            }),
            hits_addend: u64::from(beat.add),
        });
        if beat.own_key() {
            specs.push(DescriptorSpec {
                entries: &node_entries,
                limit: Some(Override {
                    requests_per_unit: BEAT_LIMIT,
                    unit: Unit::Minute,
                }),
                hits_addend: u64::from(beat.add),
            });
        }
    }
    for ((_, _, limit, unit, hits), e) in owned.iter().zip(&entries) {
        specs.push(DescriptorSpec {
            entries: e,
            limit: Some(Override {
                requests_per_unit: limit.saturating_mul(WIDE),
                unit: *unit,
            }),
            hits_addend: u64::from(*hits),
        });
    }
    rls::encode_request(domain, &specs)
}

/// How an answer was taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Every key's fleet count was put back.
    Answered,
    /// The call failed: every key's hits are sent again with the next sync,
    /// or (a timeout) kept here as possibly counted.
    Failed(RlsError),
}

/// Puts a call's answer back (`grpc_status` and the unframed `body`), or
/// its failure, at `now`.
pub fn settle<S: Store + ?Sized>(
    store: &S,
    limiter: &Limiter,
    batch: &Batch,
    grpc_status: u32,
    body: Option<&[u8]>,
    now_ms: u64,
) -> (Settled, Vec<StoreError>) {
    let counts = counts_of(batch, grpc_status, body);
    let skip = batch.lead();
    let mut errors = Vec::new();
    let count = |i: usize| counts.as_ref().ok().and_then(|c| c.get(i).copied());
    let failure = match &counts {
        Ok(_) => None,
        Err(e) => Some(failure_of(e)),
    };
    // The record: the heartbeat's answer, whether the service answers, and
    // the nodes now known for the answered keys' shares.
    let mut nodes = 1;
    if let Some(f) = &limiter.fleet {
        let heard = update(store, &f.record_key, |v| {
            let mut r = v.and_then(Record::decode).unwrap_or_default();
            if let (Some(beat), Some(n)) = (batch.heartbeat, count(0)) {
                if let (true, Some(own)) = (beat.ask, count(1)) {
                    r = r.asked(batch.sent_ms, own);
                }
                r = r.heard(batch.sent_ms, n, beat.add);
            } else if let (Some(beat), Some(Failure::MaybeCounted)) = (batch.heartbeat, failure) {
                // An add that may have landed is read back before it is
                // sent again (a node counted twice would shrink every share
                // for two minutes; a node missed would widen them).
                r = r.maybe_beat(batch.sent_ms, beat);
            }
            r = if counts.is_ok() {
                r.answered(now_ms)
            } else {
                r.failed(now_ms)
            };
            (Some(r.encode()), r.nodes(now_ms).unwrap_or(f.nodes))
        });
        match heard {
            Ok(n) => nodes = n,
            Err(e) => errors.push(e),
        }
    }
    // Lane by lane, in the order taken (a lane's keys are together).
    let mut at = 0;
    while let Some((r, b, _)) = batch.items.get(at) {
        let end = batch
            .items
            .iter()
            .skip(at)
            .position(|(r2, b2, _)| (r2, b2) != (r, b))
            .map_or(batch.items.len(), |n| at + n);
        let outcome: Vec<(Taken, SyncOutcome)> = batch
            .items
            .get(at..end)
            .unwrap_or_default()
            .iter()
            .enumerate()
            .map(|(k, (_, _, t))| {
                let o = match (count(skip + at + k), failure) {
                    (Some(fleet), _) => SyncOutcome::Count { fleet, nodes },
                    (None, f) => SyncOutcome::Failed(f.unwrap_or(Failure::NotCounted)),
                };
                (*t, o)
            })
            .collect();
        if let Some(lane) = limiter.lane(*r, *b) {
            errors.extend(fleet_lane::settle(store, lane, &outcome, now_ms).err());
        }
        at = end;
    }
    let settled = match counts {
        Ok(_) => Settled::Answered,
        Err(e) => Settled::Failed(e),
    };
    (settled, errors)
}

/// Whether a failed call may have been counted: a timeout (or a call cut
/// after it was sent, which the host reports as one) may have reached the
/// service's INCRBY; a refusal, an unreachable service or an answer
/// without a limit counted nothing.
fn failure_of(e: &RlsError) -> Failure {
    match e {
        RlsError::Grpc(GrpcCode::DeadlineExceeded) => Failure::MaybeCounted,
        _ => Failure::NotCounted,
    }
}

/// The gRPC status a failed sync call is settled with. Envoy answers every
/// failed gRPC call as UNAVAILABLE; one that may have reached the service
/// (a timeout, a connection cut after sending, no answer at all) may have
/// been counted, so it is settled as DEADLINE_EXCEEDED ([`Failure::MaybeCounted`])
/// unless Envoy's `grpc-message` of an answered call says the service was
/// never reached ("… connection failure …", "no healthy upstream", an
/// overflowed circuit breaker).
pub(crate) fn failed_call_status(status: u32, answered: bool, grpc_message: &str) -> u32 {
    let message = grpc_message.to_ascii_lowercase();
    let unreached = answered
        && ["connection failure", "no healthy upstream", "overflow"]
            .iter()
            .any(|m| message.contains(m));
    if status != 0 && !unreached {
        GrpcCode::DeadlineExceeded.number()
    } else {
        status
    }
}

/// The `id` (field 1) of a serialized `envoy.config.core.v3.Node`, as the
/// host's `node` property may give it; `None` when there is none.
pub(crate) fn node_id_of(bytes: &[u8]) -> Option<String> {
    use prost::Message;
    #[derive(Clone, PartialEq, prost::Message)]
    struct NodeId {
        #[prost(string, tag = "1")]
        id: String,
    }
    NodeId::decode(bytes)
        .ok()
        .map(|n| n.id)
        .filter(|id| !id.is_empty())
}

/// Each descriptor's count after the call (`limit − remaining`), or why the
/// call gave none. A descriptor without a limit (the domain is not in the
/// service's configuration) fails the call: nothing was counted.
fn counts_of(batch: &Batch, grpc_status: u32, body: Option<&[u8]>) -> Result<Vec<u32>, RlsError> {
    if grpc_status != 0 {
        return Err(RlsError::Grpc(GrpcCode::from_wire(grpc_status)));
    }
    let answer = rls::decode_answer(body.ok_or(RlsError::NoBody)?)?;
    let sent = batch.items.len() + batch.lead();
    if answer.statuses.len() != sent {
        return Err(RlsError::StatusCount {
            sent,
            got: answer.statuses.len(),
        });
    }
    answer
        .statuses
        .iter()
        .enumerate()
        .map(|(descriptor, s)| {
            s.limit
                .map(|l| l.requests_per_unit.saturating_sub(s.remaining))
                .ok_or(RlsError::NoLimit { descriptor })
        })
        .collect()
}

//! Opening each worker's connection to the rate-limit service before its
//! first sign-in. A worker's first call opens the HTTP/2 connection, and on
//! a loaded node that alone can outlast a 100 ms `timeout_ms`: a 503 under
//! `deny` (an unchecked admission under `allow`) for the first sign-in per
//! worker after every start. So each worker's root context makes one call
//! of its own at its first ticks, which the service answers without
//! counting anything (below), and stops once one is answered.

use crate::config::plan::Plan;
use crate::rls::{self, DescriptorSpec};

use crate::pipeline::phase::service::ServiceCall;

/// How long the warm-up call may take: it is no request's, so it may wait
/// for a slow first connection far longer than a request would.
pub(crate) const TIMEOUT_MS: u64 = 5_000;

/// Tries, one a tick at most: while the service is unreachable (started
/// after Envoy), each try is one connection attempt; after these the first
/// sign-in opens the connection, as without a warm-up.
pub(crate) const TRIES: u32 = 30;

/// The descriptor of the call. The service's configuration (`rls-config`)
/// has no such descriptor and it carries no limit, so the service answers
/// OK without reaching Redis; `hits_addend` 0 would count nothing anyway.
const ENTRIES: [(&str, &str); 1] = [("ratebound", "warm-up")];

/// The warm-up call of a configuration: `None` when it has no installation
/// bound (no route calls the service).
pub fn call(plan: &Plan) -> Option<ServiceCall<'_>> {
    let service = plan.service.as_ref()?;
    if plan.routes.iter().all(|r| r.service_bounds.is_empty()) {
        return None;
    }
    let spec = DescriptorSpec {
        entries: &ENTRIES,
        limit: None,
        hits_addend: 0,
    };
    Some(ServiceCall {
        cluster: &service.cluster,
        timeout_ms: TIMEOUT_MS,
        message: rls::encode_request(&service.domain, &[spec]),
    })
}

/// Where a worker's warm-up stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WarmUp {
    /// No call in flight; `tries` failed so far, and the next tick tries.
    Idle { tries: u32 },
    /// A call is in flight; `tries` failed before it.
    Waiting { tries: u32 },
    /// Answered, or not (given up after [`TRIES`], or nothing to warm):
    /// no more calls.
    Done { answered: bool },
}

impl Default for WarmUp {
    fn default() -> Self {
        WarmUp::Idle { tries: 0 }
    }
}

impl WarmUp {
    /// At a tick: whether to send the call now (and it is then in flight).
    pub fn due(&mut self) -> bool {
        let WarmUp::Idle { tries } = *self else {
            return false;
        };
        *self = WarmUp::Waiting { tries };
        true
    }

    /// The call in flight was answered with `grpc_status` (0 OK; any other,
    /// or a call the host could not make, is a failure). True when this
    /// failure was the last try: the caller says so once.
    pub fn answered(&mut self, grpc_status: u32) -> bool {
        let WarmUp::Waiting { tries } = *self else {
            return false;
        };
        if grpc_status == 0 {
            *self = WarmUp::Done { answered: true };
            return false;
        }
        let tries = tries.saturating_add(1);
        if tries >= TRIES {
            *self = WarmUp::Done { answered: false };
            return true;
        }
        *self = WarmUp::Idle { tries };
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rls::proto;
    use prost::Message;

    fn plan(json: &str) -> Plan {
        Plan::compile(&crate::config::parse(json.as_bytes()).unwrap())
    }

    #[test]
    fn the_call_counts_nothing_and_names_no_bound() {
        let p = plan(crate::node::tests::SIGN_IN);
        let c = call(&p).unwrap();
        assert_eq!((c.cluster, c.timeout_ms), ("rls", TIMEOUT_MS));
        let r = proto::RateLimitRequest::decode(c.message.as_slice()).unwrap();
        assert_eq!(r.domain, "signin");
        let [d] = r.descriptors.as_slice() else {
            panic!("one descriptor: {r:?}")
        };
        let entries: Vec<_> = d
            .entries
            .iter()
            .map(|e| (e.key.as_str(), e.value.as_str()))
            .collect();
        assert_eq!(entries, [("ratebound", "warm-up")]);
        // No limit: the service finds none for it and never reaches Redis.
        assert!(d.limit.is_none());
        assert_eq!(d.hits_addend.as_ref().map(|h| h.value), Some(0));
        // Nothing a bound sends looks like it (bounds send `bound`).
        assert!(d.entries.iter().all(|e| e.key != "bound"));
    }

    #[test]
    fn a_configuration_without_installation_bounds_never_calls() {
        let p = plan(
            r#"{"instance": "n", "routes": [{"name": "r", "bounds": [
                {"name": "a", "per": "address", "limit": 5, "window": "PT1M"}]}]}"#,
        );
        assert!(call(&p).is_none());
    }

    #[test]
    fn one_call_at_a_time_until_one_is_answered() {
        let mut w = WarmUp::default();
        assert!(w.due());
        assert!(!w.due(), "a second call while one is in flight");
        assert!(!w.answered(14));
        assert!(w.due(), "a failed try is tried again at the next tick");
        assert!(!w.answered(0));
        assert_eq!(w, WarmUp::Done { answered: true });
        assert!(!w.due());
        assert!(!w.answered(0), "no call in flight");
    }

    #[test]
    fn it_gives_up_after_its_tries_and_says_so_once() {
        let mut w = WarmUp::default();
        let mut last = Vec::new();
        for _ in 0..TRIES {
            assert!(w.due());
            last.push(w.answered(14));
        }
        assert_eq!(last.iter().filter(|&&l| l).count(), 1);
        assert_eq!(last.last(), Some(&true));
        assert_eq!(w, WarmUp::Done { answered: false });
        assert!(!w.due());
    }
}

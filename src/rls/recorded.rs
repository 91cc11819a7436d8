//! Answers of the real envoyproxy/ratelimit, recorded by scripts/record-rls.py
//! on 2026-12-01 (service v1.4.1-0.20260122083618-3fb702589d36,
//! redis-server from Debian), over a Redis on 127.0.0.1, with this YAML
//! (domain `ratebound`):
//! `bound=yaml`: 2 requests per hour. Calls in this order; each answer's code
//! was checked when recorded. Hex of the `RateLimitResponse` message.
//! Regenerate: `.venv/bin/python scripts/record-rls.py`.
#![cfg(test)]

/// bound=yaml (2 per hour in the YAML), 1st call.
pub(crate) const OK_REMAINING_1: &str = "0801120f08011204080210031801220308ee03";

/// bound=yaml, 2nd call: OK, the last one taken.
pub(crate) const OK_REMAINING_0: &str = "0801120d0801120408021003220308ee03";

/// bound=yaml, 3rd call.
pub(crate) const OVER_LIMIT: &str = "0802120d0802120408021003220308ee03";

/// bound=yaml, hits_addend 0 (not counted): still over.
pub(crate) const CHECK_ONLY_OVER: &str = "0802120d0802120408021003220308ee03";

/// nothing=here, not in the YAML: OK, no limit.
pub(crate) const UNKNOWN_DESCRIPTOR: &str = "080112020801";

/// bound=installation,caller=c1 with override 5 per day.
pub(crate) const OVERRIDE: &str = "0801121008011204080510041804220408aeb604";

/// [override 5/day caller=c2, bound=yaml]: the 2nd over.
pub(crate) const TWO_DESCRIPTORS: &str =
    "0802121008011204080510041804220408aeb604120d0802120408021003220308ee03";

/// domain 'nobody' (not in the YAML), override 5/day: OK, no limit.
pub(crate) const UNKNOWN_DOMAIN_OVERRIDE: &str = "080112020801";

/// A request without descriptors: the gRPC status of the failed call.
pub(crate) const GRPC_STATUS_EMPTY_DESCRIPTORS: u32 = 2;

/// bound=yaml while Redis is stopped: the gRPC status of the failed call.
pub(crate) const GRPC_STATUS_REDIS_DOWN: u32 = 2;

/// The request of `OVERRIDE`, as the recorder encoded it (and the service
/// accepted it): domain `ratebound`, entries bound=installation and
/// caller=c1, override 5 per day, hits_addend 1.
pub(crate) const OVERRIDE_REQUEST: &str = "0a0972617465626f756e64122f0a150a05626f756e64120c696e7374616c6c6174696f6e0a0c0a0663616c6c6572120263311204080510041a020801";

/// The Redis keys after the calls (the window start is the last part).
pub(crate) const REDIS_KEYS: &[&str] = &[
    "ratebound_bound_installation_caller_c1_1796083200",
    "ratebound_bound_installation_caller_c2_1796083200",
    "ratebound_bound_yaml_1796094000",
];

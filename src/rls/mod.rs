//! The rate-limit service protocol (`envoy.service.ratelimit.v3`), as spoken
//! by envoyproxy/ratelimit: what installation-wide bounds send over gRPC and
//! how an answer becomes a decision. Plain Rust, no host calls: the host
//! sends the bytes from [`encode_request`], [`frame`]d, as an HTTP/2 call
//! (see `pipeline::dispatch_rls` for why not `proxy_grpc_call`), and hands
//! the gRPC status ([`call_status`]) and the [`unframe`]d body it gets back
//! to [`outcome`].
//!
//! The service's behaviour this relies on (an answer OK at count == limit
//! with 0 remaining, OVER_LIMIT only above it, every call counted) is
//! described, with where it was checked, in docs/rate-limit-service.md.

mod encode;
pub mod proto;
#[cfg(test)]
mod recorded;
#[cfg(test)]
mod tests;

use core::fmt;

use prost::Message;

/// The gRPC service and method: the call's `:path` is `/SERVICE/METHOD`
/// ([`PATH`], which the filter sends; this spelling is its tests').
#[cfg(test)]
pub(crate) const SERVICE: &str = "envoy.service.ratelimit.v3.RateLimitService";
pub const METHOD: &str = "ShouldRateLimit";
/// `/SERVICE/METHOD`, spelled out: a constant, not a string built per call
/// (`the_path_is_service_then_method`).
pub(crate) const PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// The call's `grpc-timeout` for `ms` (`{ms}m`), written into `buf`: the
/// same text `format!` builds, without its machinery per call
/// (`the_timeout_is_the_one_format_writes`).
pub(crate) fn grpc_timeout(ms: u64, buf: &mut [u8; 21]) -> &str {
    let mut rest = ms;
    let mut len = 1;
    let mut slots = buf.iter_mut().rev();
    if let Some(m) = slots.next() {
        *m = b'm';
    }
    // 21 bytes: u64::MAX has 20 digits.
    for slot in slots {
        *slot = b'0' + (rest % 10) as u8;
        rest /= 10;
        len += 1;
        if rest == 0 {
            break;
        }
    }
    let start = buf.len().saturating_sub(len);
    buf.get(start..)
        .and_then(|b| core::str::from_utf8(b).ok())
        .unwrap_or_default()
}

pub use crate::config::Unit;
/// The service's calls end in a gRPC status.
pub use crate::reply::grpc::GrpcCode;

/// Hashing keys every Envoy of an installation derives alike, for the keys
/// callers are sent to the service under: from the installation's secret
/// and the domain. Without a secret they come from the domain alone, which
/// is public: anyone who reads Redis could then hash a list of names and
/// find them (`ratebound check` warns).
pub(crate) fn service_keys(domain: &str, secret: Option<&crate::config::Secret>) -> (u64, u64) {
    use siphasher::sip128::{Hasher128, SipHasher13};
    use std::hash::Hasher;
    let mut h = SipHasher13::new_with_keys(0x7261_7465, 0x0062_6f75_6e64);
    if let Some(s) = secret {
        // Length first: no secret and domain pair runs into another.
        h.write_u64(s.0.len() as u64);
        h.write(&s.0);
    }
    h.write(domain.as_bytes());
    let k = h.finish128();
    (k.h1, k.h2)
}

/// A unit as `envoy.type.v3.RateLimitUnit` numbers it.
fn wire(u: Unit) -> i32 {
    match u {
        Unit::Second => 1,
        Unit::Minute => 2,
        Unit::Hour => 3,
        Unit::Day => 4,
        Unit::Month => 5,
        Unit::Year => 6,
        Unit::Week => 7,
    }
}

/// The window length, in seconds, of a unit in an answer
/// (`RateLimitResponse.RateLimit.Unit`, which also has week, month and
/// year: the service counts a month as 30 days and a year as 365).
/// `None` for UNKNOWN or a number this code does not know.
pub(crate) fn answer_unit_seconds(unit: i32) -> Option<u64> {
    const DAY: u64 = 86_400;
    match unit {
        1 => Some(1),
        2 => Some(60),
        3 => Some(3_600),
        4 => Some(DAY),
        5 => Some(30 * DAY),
        6 => Some(365 * DAY),
        7 => Some(7 * DAY),
        _ => None,
    }
}

/// A limit sent with a descriptor: the service applies it instead of its
/// YAML (the domain must still be in the YAML).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Override {
    pub requests_per_unit: u32,
    pub unit: Unit,
}

/// One descriptor of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DescriptorSpec<'a> {
    /// (key, value) pairs, in order; the service's counter is keyed by all of them.
    pub entries: &'a [(&'a str, &'a str)],
    pub limit: Option<Override>,
    /// What to add to the counter: 1 per request; 0 asks without counting.
    /// Always sent, so that 0 is not taken for "unset" (which counts 1).
    pub hits_addend: u64,
}

/// A `RateLimitRequest` for `domain`, encoded.
pub(crate) fn encode_request(domain: &str, descriptors: &[DescriptorSpec<'_>]) -> Vec<u8> {
    encode::request(domain, descriptors)
}

/// A code of the answer, overall or per descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Unknown,
    Ok,
    OverLimit,
}

impl Code {
    fn from_wire(code: i32) -> Result<Code, RlsError> {
        match code {
            0 => Ok(Code::Unknown),
            1 => Ok(Code::Ok),
            2 => Ok(Code::OverLimit),
            other => Err(RlsError::UnknownCode(other)),
        }
    }
}

/// The limit the service applied to a descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub requests_per_unit: u32,
    /// The window length; `None` if the unit is UNKNOWN or not known here.
    pub unit_s: Option<u64>,
}

/// The answer for one descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DescriptorAnswer {
    pub code: Code,
    /// `None`: no limit applies (a descriptor or domain the service does
    /// not know, or an unlimited one); then `remaining` means nothing.
    pub limit: Option<Limit>,
    /// Requests left in the window after this one. The service answers OK
    /// with 0 when this request took the last one (count == limit).
    pub remaining: u32,
    /// Seconds until the window ends, rounded up, at least 1; `None` when
    /// the service sent no duration (no limit applies).
    pub reset_s: Option<u64>,
}

/// A decoded `RateLimitResponse`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServiceAnswer {
    pub overall: Code,
    /// One per descriptor sent, in the same order.
    pub statuses: Vec<DescriptorAnswer>,
}

/// `google.protobuf.Duration` in whole seconds, rounded up, at least 1
/// (a refusal always tells the caller to wait).
fn reset_seconds(d: &proto::Duration) -> u64 {
    // A negative duration is malformed; it still means "now", so 1.
    let whole = u64::try_from(d.seconds).unwrap_or(0);
    let up = if d.nanos > 0 {
        whole.saturating_add(1)
    } else {
        whole
    };
    up.max(1)
}

/// Decodes a `RateLimitResponse`.
pub(crate) fn decode_answer(bytes: &[u8]) -> Result<ServiceAnswer, RlsError> {
    let response = proto::RateLimitResponse::decode(bytes).map_err(RlsError::Decode)?;
    let mut statuses = Vec::with_capacity(response.statuses.len());
    for status in &response.statuses {
        statuses.push(DescriptorAnswer {
            code: Code::from_wire(status.code)?,
            limit: status.current_limit.as_ref().map(|l| Limit {
                requests_per_unit: l.requests_per_unit,
                unit_s: answer_unit_seconds(l.unit),
            }),
            remaining: status.limit_remaining,
            reset_s: status.duration_until_reset.as_ref().map(reset_seconds),
        });
    }
    Ok(ServiceAnswer {
        overall: Code::from_wire(response.overall_code)?,
        statuses,
    })
}

/// What the filter does with a call to the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallOutcome {
    /// The service admitted the request (and counted it, for descriptors
    /// sent with a non-zero `hits_addend`). Per descriptor, `remaining`
    /// tells whether this request took the last one (0 with a limit).
    Admit { statuses: Vec<DescriptorAnswer> },
    /// Refused by descriptor `descriptor` (the first one over its limit);
    /// nothing remains in its window. The service has counted this request
    /// anyway, as it counts every call.
    Refuse {
        descriptor: usize,
        limit: u32,
        reset_s: u64,
        /// Every descriptor's answer (a later one may be over too).
        statuses: Vec<DescriptorAnswer>,
    },
    /// No decision: the configured failure policy applies.
    Error(RlsError),
}

/// Maps a finished call to a decision. `grpc_status` is the call's gRPC
/// status (0 OK; Envoy reports an unreachable service as 14 UNAVAILABLE and
/// a timeout as 4 DEADLINE_EXCEEDED), `body` the response message, if any,
/// and `sent` the number of descriptors in the request.
pub fn outcome(grpc_status: u32, body: Option<&[u8]>, sent: usize) -> CallOutcome {
    match answer_of(grpc_status, body, sent) {
        Ok(outcome) => outcome,
        Err(e) => CallOutcome::Error(e),
    }
}

fn answer_of(grpc_status: u32, body: Option<&[u8]>, sent: usize) -> Result<CallOutcome, RlsError> {
    if grpc_status != 0 {
        return Err(RlsError::Grpc(GrpcCode::from_wire(grpc_status)));
    }
    let answer = decode_answer(body.ok_or(RlsError::NoBody)?)?;
    if answer.statuses.len() != sent {
        return Err(RlsError::StatusCount {
            sent,
            got: answer.statuses.len(),
        });
    }
    match answer.overall {
        Code::Unknown => Err(RlsError::OverallUnknown),
        // Trust the overall code: with the service's global shadow mode on,
        // it is OK while descriptors still say OVER_LIMIT.
        Code::Ok => Ok(CallOutcome::Admit {
            statuses: answer.statuses,
        }),
        Code::OverLimit => {
            let (descriptor, status) = answer
                .statuses
                .iter()
                .enumerate()
                .find(|(_, s)| s.code == Code::OverLimit)
                .ok_or(RlsError::OverLimitWithoutDescriptor)?;
            let limit = status.limit.ok_or(RlsError::MissingLimit { descriptor })?;
            let reset_s = status
                .reset_s
                .ok_or(RlsError::MissingReset { descriptor })?;
            Ok(CallOutcome::Refuse {
                descriptor,
                limit: limit.requests_per_unit,
                reset_s,
                statuses: answer.statuses,
            })
        }
    }
}

/// A message in a gRPC frame: not compressed, its length, itself.
pub fn frame(message: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(5 + message.len());
    f.push(0);
    f.extend_from_slice(
        &u32::try_from(message.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    f.extend_from_slice(message);
    f
}

/// The one message of a unary answer's body.
pub(crate) fn unframe(body: &[u8]) -> Result<&[u8], RlsError> {
    let (head, rest) = body.split_at_checked(5).ok_or(RlsError::Frame)?;
    let [flag, len @ ..] = <[u8; 5]>::try_from(head).map_err(|_| RlsError::Frame)?;
    let len = usize::try_from(u32::from_be_bytes(len)).map_err(|_| RlsError::Frame)?;
    // A compressed message was never asked for.
    if flag != 0 || rest.len() != len {
        return Err(RlsError::Frame);
    }
    Ok(rest)
}

/// The gRPC status of an HTTP/2 call-out's answer: `grpc-status` (from the
/// trailers, or the headers of a trailers-only answer) when the HTTP status
/// is 200. No answer at all (reset, timeout: Envoy reports no `:status`)
/// is UNAVAILABLE; another HTTP status is UNKNOWN, as gRPC clients map them.
pub(crate) fn call_status(http_status: Option<&str>, grpc_status: Option<&str>) -> u32 {
    match http_status {
        None => GrpcCode::Unavailable.number(),
        Some("200") => grpc_status
            .and_then(|g| g.trim().parse().ok())
            .unwrap_or(GrpcCode::Unknown.number()),
        Some(_) => GrpcCode::Unknown.number(),
    }
}

/// Why a call to the service gave no decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RlsError {
    /// The call failed: the service unreachable (UNAVAILABLE), too slow
    /// (DEADLINE_EXCEEDED), or an error of its own (e.g. UNKNOWN when it
    /// cannot reach Redis, or for an empty domain or descriptor list).
    Grpc(GrpcCode),
    /// gRPC status OK but no message.
    NoBody,
    /// The body is not one uncompressed gRPC message.
    Frame,
    /// The message is not a `RateLimitResponse`.
    Decode(prost::DecodeError),
    /// A code outside UNKNOWN, OK, OVER_LIMIT.
    UnknownCode(i32),
    /// The overall code is UNKNOWN: the service decided nothing.
    OverallUnknown,
    /// Not one status per descriptor sent.
    StatusCount { sent: usize, got: usize },
    /// OVER_LIMIT overall, but no descriptor is.
    OverLimitWithoutDescriptor,
    /// A descriptor over its limit without the limit.
    MissingLimit { descriptor: usize },
    /// A descriptor sent with a limit override came back without a limit:
    /// the domain is not in the service's configuration.
    NoLimit { descriptor: usize },
    /// A descriptor over its limit without the time until its window ends.
    MissingReset { descriptor: usize },
}

impl fmt::Display for RlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RlsError::Grpc(code) => write!(f, "the rate-limit service call failed: gRPC status {code}"),
            RlsError::NoBody => f.write_str("the rate-limit service answered gRPC OK without a message"),
            RlsError::Frame => f.write_str("the rate-limit service's answer is not one uncompressed gRPC message"),
            RlsError::Decode(e) => write!(f, "the rate-limit service's answer is not a RateLimitResponse: {e}"),
            RlsError::UnknownCode(c) => write!(f, "the rate-limit service's answer has code {c}, not UNKNOWN (0), OK (1) or OVER_LIMIT (2)"),
            RlsError::OverallUnknown => f.write_str("the rate-limit service's answer has overall code UNKNOWN: no decision"),
            RlsError::StatusCount { sent, got } => write!(f, "the rate-limit service answered {got} descriptor statuses for {sent} descriptors"),
            RlsError::OverLimitWithoutDescriptor => f.write_str("the rate-limit service answered OVER_LIMIT but no descriptor is over its limit"),
            RlsError::MissingLimit { descriptor } => write!(f, "the rate-limit service answered OVER_LIMIT for descriptor {descriptor} without its limit"),
            RlsError::NoLimit { descriptor } => write!(f, "the rate-limit service applied no limit to descriptor {descriptor}: is the domain in its configuration (`ratebound rls-config`)?"),
            RlsError::MissingReset { descriptor } => write!(f, "the rate-limit service answered OVER_LIMIT for descriptor {descriptor} without the time until its window ends"),
        }
    }
}

impl std::error::Error for RlsError {}

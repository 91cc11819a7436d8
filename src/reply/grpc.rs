//! gRPC's status codes (the one table: a refusal carries them, a call to the
//! rate-limit service ends in them), and a refusal in gRPC's terms:
//! `google.rpc.Status` with a `google.rpc.RetryInfo`, as gRPC clients read
//! it from `grpc-status-details-bin` (base64 of the serialized Status).

use prost::Message;
use std::fmt;

/// The two statuses a refusal may carry.
pub(crate) const RESOURCE_EXHAUSTED: u32 = GrpcCode::ResourceExhausted.number();
pub(crate) const UNAVAILABLE: u32 = GrpcCode::Unavailable.number();

/// A gRPC status code other than OK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrpcCode {
    Cancelled,
    Unknown,
    InvalidArgument,
    DeadlineExceeded,
    NotFound,
    AlreadyExists,
    PermissionDenied,
    ResourceExhausted,
    FailedPrecondition,
    Aborted,
    OutOfRange,
    Unimplemented,
    Internal,
    Unavailable,
    DataLoss,
    Unauthenticated,
    /// A number outside the gRPC codes (0 included: it is no error).
    Other(u32),
}

impl GrpcCode {
    pub(crate) fn from_wire(code: u32) -> GrpcCode {
        match code {
            1 => GrpcCode::Cancelled,
            2 => GrpcCode::Unknown,
            3 => GrpcCode::InvalidArgument,
            4 => GrpcCode::DeadlineExceeded,
            5 => GrpcCode::NotFound,
            6 => GrpcCode::AlreadyExists,
            7 => GrpcCode::PermissionDenied,
            8 => GrpcCode::ResourceExhausted,
            9 => GrpcCode::FailedPrecondition,
            10 => GrpcCode::Aborted,
            11 => GrpcCode::OutOfRange,
            12 => GrpcCode::Unimplemented,
            13 => GrpcCode::Internal,
            14 => GrpcCode::Unavailable,
            15 => GrpcCode::DataLoss,
            16 => GrpcCode::Unauthenticated,
            other => GrpcCode::Other(other),
        }
    }

    pub const fn number(self) -> u32 {
        match self {
            GrpcCode::Cancelled => 1,
            GrpcCode::Unknown => 2,
            GrpcCode::InvalidArgument => 3,
            GrpcCode::DeadlineExceeded => 4,
            GrpcCode::NotFound => 5,
            GrpcCode::AlreadyExists => 6,
            GrpcCode::PermissionDenied => 7,
            GrpcCode::ResourceExhausted => 8,
            GrpcCode::FailedPrecondition => 9,
            GrpcCode::Aborted => 10,
            GrpcCode::OutOfRange => 11,
            GrpcCode::Unimplemented => 12,
            GrpcCode::Internal => 13,
            GrpcCode::Unavailable => 14,
            GrpcCode::DataLoss => 15,
            GrpcCode::Unauthenticated => 16,
            GrpcCode::Other(n) => n,
        }
    }

    fn name(self) -> &'static str {
        match self {
            GrpcCode::Cancelled => "CANCELLED",
            GrpcCode::Unknown => "UNKNOWN",
            GrpcCode::InvalidArgument => "INVALID_ARGUMENT",
            GrpcCode::DeadlineExceeded => "DEADLINE_EXCEEDED",
            GrpcCode::NotFound => "NOT_FOUND",
            GrpcCode::AlreadyExists => "ALREADY_EXISTS",
            GrpcCode::PermissionDenied => "PERMISSION_DENIED",
            GrpcCode::ResourceExhausted => "RESOURCE_EXHAUSTED",
            GrpcCode::FailedPrecondition => "FAILED_PRECONDITION",
            GrpcCode::Aborted => "ABORTED",
            GrpcCode::OutOfRange => "OUT_OF_RANGE",
            GrpcCode::Unimplemented => "UNIMPLEMENTED",
            GrpcCode::Internal => "INTERNAL",
            GrpcCode::Unavailable => "UNAVAILABLE",
            GrpcCode::DataLoss => "DATA_LOSS",
            GrpcCode::Unauthenticated => "UNAUTHENTICATED",
            GrpcCode::Other(_) => "not a gRPC status code",
        }
    }
}

impl fmt::Display for GrpcCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.number(), self.name())
    }
}

#[derive(Clone, PartialEq, prost::Message)]
struct Status {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(message, repeated, tag = "3")]
    details: Vec<Any>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Any {
    #[prost(string, tag = "1")]
    type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RetryInfo {
    #[prost(message, optional, tag = "1")]
    retry_delay: Option<Duration>,
}

/// `google.protobuf.Duration`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Duration {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// `grpc-status-details-bin`: the status, its message and a RetryInfo of
/// `retry_s` seconds, serialized and base64-encoded (padded: gRPC accepts
/// both).
pub(crate) fn status_details(code: u32, message: &str, retry_s: u64) -> String {
    let retry = RetryInfo {
        retry_delay: Some(Duration {
            seconds: i64::try_from(retry_s).unwrap_or(i64::MAX),
            nanos: 0,
        }),
    };
    let status = Status {
        code: i32::try_from(code).unwrap_or(GrpcCode::Unknown.number() as i32),
        message: message.to_string(),
        details: vec![Any {
            type_url: "type.googleapis.com/google.rpc.RetryInfo".to_string(),
            value: retry.encode_to_vec(),
        }],
    };
    base64(&status.encode_to_vec())
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let sextet = |n: u32| char::from(ALPHABET.get((n & 63) as usize).copied().unwrap_or(b'A'));
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = b(0) << 16 | b(1) << 8 | b(2);
        out.push(sextet(n >> 18));
        out.push(sextet(n >> 12));
        out.push(if chunk.len() > 1 { sextet(n >> 6) } else { '=' });
        out.push(if chunk.len() > 2 { sextet(n) } else { '=' });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_of_known_strings() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
    }

    #[test]
    fn the_status_carries_the_code_message_and_retry_delay() {
        let text = status_details(RESOURCE_EXHAUSTED, "slow down", 17);
        // Decode back with prost (base64 decoded by hand for the test).
        let bytes = decode64(&text);
        let s = Status::decode(bytes.as_slice()).unwrap();
        assert_eq!((s.code, s.message.as_str()), (8, "slow down"));
        assert_eq!(
            s.details[0].type_url,
            "type.googleapis.com/google.rpc.RetryInfo"
        );
        let r = RetryInfo::decode(s.details[0].value.as_slice()).unwrap();
        assert_eq!(r.retry_delay.map(|d| d.seconds), Some(17));
    }

    fn decode64(s: &str) -> Vec<u8> {
        let val = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            _ => 63,
        };
        let mut out = Vec::new();
        for chunk in s.as_bytes().chunks(4) {
            let n = chunk
                .iter()
                .filter(|c| **c != b'=')
                .fold((0u32, 0), |(n, k), c| {
                    (n | u32::from(val(*c)) << (18 - 6 * k), k + 1)
                });
            let bytes = [(n.0 >> 16) as u8, (n.0 >> 8) as u8, n.0 as u8];
            out.extend_from_slice(&bytes[..n.1 - 1]);
        }
        out
    }
}

//! The messages of `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`,
//! written by hand (no protoc, no build script) and only the fields ratebound
//! uses. Fields left out are skipped by the decoder, as protobuf requires.
//!
//! Field numbers checked against the generated Go code of the API the
//! service is built with (go-control-plane envoy v1.32.4):
//! `envoy/service/ratelimit/v3/rls.pb.go` and
//! `envoy/extensions/common/ratelimit/v3/ratelimit.pb.go`
//! (docs/rate-limit-service.md).

pub use crate::reply::grpc::Duration;

/// `envoy.service.ratelimit.v3.RateLimitRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RateLimitRequest {
    #[prost(string, tag = "1")]
    pub domain: String,
    #[prost(message, repeated, tag = "2")]
    pub descriptors: Vec<RateLimitDescriptor>,
    /// Used by the service for descriptors without their own `hits_addend`
    /// (0 means 1 there). ratebound always sets the per-descriptor one.
    #[prost(uint32, tag = "3")]
    pub hits_addend: u32,
}

/// `envoy.extensions.common.ratelimit.v3.RateLimitDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RateLimitDescriptor {
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<DescriptorEntry>,
    #[prost(message, optional, tag = "2")]
    pub limit: Option<RateLimitOverride>,
    /// A wrapper so that 0 ("check, do not count") differs from unset.
    #[prost(message, optional, tag = "3")]
    pub hits_addend: Option<UInt64Value>,
}

/// `envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.Entry`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DescriptorEntry {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.RateLimitOverride`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RateLimitOverride {
    #[prost(uint32, tag = "1")]
    pub requests_per_unit: u32,
    /// `envoy.type.v3.RateLimitUnit`: 1 second, 2 minute, 3 hour, 4 day.
    #[prost(int32, tag = "2")]
    pub unit: i32,
}

/// `google.protobuf.UInt64Value`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct UInt64Value {
    #[prost(uint64, tag = "1")]
    pub value: u64,
}

/// `envoy.service.ratelimit.v3.RateLimitResponse` (without headers to add,
/// raw body, dynamic metadata and quota: fields 3 to 7).
#[derive(Clone, PartialEq, prost::Message)]
pub struct RateLimitResponse {
    /// `RateLimitResponse.Code`: 0 UNKNOWN, 1 OK, 2 OVER_LIMIT.
    #[prost(int32, tag = "1")]
    pub overall_code: i32,
    #[prost(message, repeated, tag = "2")]
    pub statuses: Vec<DescriptorStatus>,
}

/// `envoy.service.ratelimit.v3.RateLimitResponse.DescriptorStatus`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DescriptorStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(message, optional, tag = "2")]
    pub current_limit: Option<RateLimit>,
    #[prost(uint32, tag = "3")]
    pub limit_remaining: u32,
    #[prost(message, optional, tag = "4")]
    pub duration_until_reset: Option<Duration>,
}

/// `envoy.service.ratelimit.v3.RateLimitResponse.RateLimit`. Note the order:
/// `name` is field 3, after `requests_per_unit` (1) and `unit` (2).
#[derive(Clone, PartialEq, prost::Message)]
pub struct RateLimit {
    #[prost(uint32, tag = "1")]
    pub requests_per_unit: u32,
    /// `RateLimitResponse.RateLimit.Unit`: 1 second, 2 minute, 3 hour,
    /// 4 day, 5 month, 6 year, 7 week.
    #[prost(int32, tag = "2")]
    pub unit: i32,
    #[prost(string, tag = "3")]
    pub name: String,
}

//! The protocol against bytes recorded from the real service, and every
//! way a call can end. Test-only: the file is compiled under `#[cfg(test)]`.
#![cfg(test)]

use prost::Message;

use super::recorded;
use super::*;

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn decoded(s: &str) -> ServiceAnswer {
    decode_answer(&hex(s)).unwrap()
}

const YAML: Limit = Limit {
    requests_per_unit: 2,
    unit_s: Some(3_600),
};
const OVERRIDE_5_PER_DAY: Limit = Limit {
    requests_per_unit: 5,
    unit_s: Some(86_400),
};

// ---- encoding ---------------------------------------------------------

#[test]
fn encodes_the_bytes_the_real_service_accepted() {
    // The recorder's own encoder, independent of prost; the service took it.
    let bytes = encode_request(
        "ratebound",
        &[DescriptorSpec {
            entries: &[("bound", "installation"), ("caller", "c1")],
            limit: Some(Override {
                requests_per_unit: 5,
                unit: Unit::Day,
            }),
            hits_addend: 1,
        }],
    );
    assert_eq!(bytes, hex(recorded::OVERRIDE_REQUEST));
}

#[test]
fn encodes_a_minimal_request_by_hand() {
    // domain "d" (1), one descriptor (2) with entry k=v (1: key 1, value 2),
    // no override, hits_addend 0 as an empty UInt64Value (3), still present.
    let bytes = encode_request(
        "d",
        &[DescriptorSpec {
            entries: &[("k", "v")],
            limit: None,
            hits_addend: 0,
        }],
    );
    assert_eq!(
        bytes,
        [
            0x0a, 1, b'd', // domain
            0x12, 10, // descriptors, 10 bytes
            0x0a, 6, 0x0a, 1, b'k', 0x12, 1, b'v', // entry
            0x1a, 0, // hits_addend: {}
        ]
    );
}

#[test]
fn round_trips_every_field() {
    let specs = [
        DescriptorSpec {
            entries: &[("bound", "b"), ("caller", "10.0.0.1")],
            limit: Some(Override {
                requests_per_unit: 100,
                unit: Unit::Minute,
            }),
            hits_addend: 1,
        },
        DescriptorSpec {
            entries: &[("bound", "c")],
            limit: None,
            hits_addend: 0,
        },
    ];
    let bytes = encode_request("ratebound", &specs);
    let back = proto::RateLimitRequest::decode(bytes.as_slice()).unwrap();
    assert_eq!(back.domain, "ratebound");
    assert_eq!(back.hits_addend, 0);
    assert_eq!(back.descriptors.len(), 2);
    let first = &back.descriptors[0];
    let pairs: Vec<(&str, &str)> = first
        .entries
        .iter()
        .map(|e| (e.key.as_str(), e.value.as_str()))
        .collect();
    assert_eq!(pairs, [("bound", "b"), ("caller", "10.0.0.1")]);
    assert_eq!(
        first.limit,
        Some(proto::RateLimitOverride {
            requests_per_unit: 100,
            unit: 2
        })
    );
    assert_eq!(first.hits_addend, Some(proto::UInt64Value { value: 1 }));
    let second = &back.descriptors[1];
    assert_eq!(second.limit, None);
    // 0 is sent, not left out: unset would count 1.
    assert_eq!(second.hits_addend, Some(proto::UInt64Value { value: 0 }));
}

#[test]
fn units_have_their_wire_numbers_and_lengths() {
    let all = [Unit::Second, Unit::Minute, Unit::Hour, Unit::Day];
    assert_eq!(all.map(wire), [1, 2, 3, 4]);
    // A unit reads back as the same length in an answer.
    for u in all {
        assert_eq!(answer_unit_seconds(wire(u)), Some(u.ms() / 1_000));
    }
}

#[test]
fn frames_round_trip_and_bad_frames_are_errors() {
    let m = b"\x08\x01";
    assert_eq!(frame(m), b"\x00\x00\x00\x00\x02\x08\x01");
    assert_eq!(unframe(&frame(m)), Ok(&m[..]));
    assert_eq!(unframe(&frame(b"")), Ok(&b""[..]));
    for bad in [
        &b""[..],
        b"\x00\x00\x00",
        b"\x01\x00\x00\x00\x00",
        b"\x00\x00\x00\x00\x03\x08\x01",
    ] {
        assert_eq!(unframe(bad), Err(RlsError::Frame), "{bad:?}");
    }
}

#[test]
fn call_status_of_an_http2_answer() {
    assert_eq!(call_status(Some("200"), Some("0")), 0);
    assert_eq!(call_status(Some("200"), Some("8")), 8);
    assert_eq!(call_status(Some("200"), None), 2);
    assert_eq!(call_status(Some("200"), Some("x")), 2);
    assert_eq!(call_status(Some("503"), Some("0")), 2);
    assert_eq!(call_status(None, None), 14);
}

// ---- decoding recorded answers -----------------------------------------

#[test]
fn first_call_is_ok_with_one_left() {
    let a = decoded(recorded::OK_REMAINING_1);
    assert_eq!(a.overall, Code::Ok);
    assert_eq!(a.statuses.len(), 1);
    let s = a.statuses[0];
    assert_eq!((s.code, s.limit, s.remaining), (Code::Ok, Some(YAML), 1));
    let reset = s.reset_s.unwrap();
    assert!((1..=3_600).contains(&reset), "{reset}");
}

#[test]
fn call_that_takes_the_last_one_is_ok_with_zero_left() {
    let a = decoded(recorded::OK_REMAINING_0);
    assert_eq!(a.overall, Code::Ok);
    let s = a.statuses[0];
    assert_eq!((s.code, s.limit, s.remaining), (Code::Ok, Some(YAML), 0));
    assert_eq!(
        outcome(0, Some(&hex(recorded::OK_REMAINING_0)), 1),
        CallOutcome::Admit { statuses: vec![s] }
    );
}

#[test]
fn call_above_the_limit_is_refused() {
    let bytes = hex(recorded::OVER_LIMIT);
    let a = decode_answer(&bytes).unwrap();
    assert_eq!(a.overall, Code::OverLimit);
    let s = a.statuses[0];
    assert_eq!(
        (s.code, s.limit, s.remaining),
        (Code::OverLimit, Some(YAML), 0)
    );
    let reset_s = s.reset_s.unwrap();
    assert_eq!(
        outcome(0, Some(&bytes), 1),
        CallOutcome::Refuse {
            descriptor: 0,
            limit: 2,
            reset_s,
            statuses: vec![s]
        }
    );
}

#[test]
fn check_without_counting_still_says_over() {
    let a = decoded(recorded::CHECK_ONLY_OVER);
    assert_eq!(a.overall, Code::OverLimit);
    assert_eq!(a.statuses[0].code, Code::OverLimit);
}

#[test]
fn unknown_descriptor_and_unknown_domain_are_ok_without_a_limit() {
    for answer in [
        recorded::UNKNOWN_DESCRIPTOR,
        recorded::UNKNOWN_DOMAIN_OVERRIDE,
    ] {
        let a = decoded(answer);
        assert_eq!(a.overall, Code::Ok);
        assert_eq!(
            a.statuses,
            [DescriptorAnswer {
                code: Code::Ok,
                limit: None,
                remaining: 0,
                reset_s: None
            }]
        );
    }
}

#[test]
fn override_limit_is_applied() {
    let a = decoded(recorded::OVERRIDE);
    assert_eq!(a.overall, Code::Ok);
    let s = a.statuses[0];
    assert_eq!(
        (s.code, s.limit, s.remaining),
        (Code::Ok, Some(OVERRIDE_5_PER_DAY), 4)
    );
    let reset = s.reset_s.unwrap();
    assert!((1..=86_400).contains(&reset), "{reset}");
}

#[test]
fn refusal_names_the_descriptor_over_its_limit() {
    let bytes = hex(recorded::TWO_DESCRIPTORS);
    let a = decode_answer(&bytes).unwrap();
    assert_eq!(a.overall, Code::OverLimit);
    assert_eq!(a.statuses[0].code, Code::Ok);
    assert_eq!(a.statuses[0].remaining, 4);
    assert_eq!(a.statuses[1].code, Code::OverLimit);
    match outcome(0, Some(&bytes), 2) {
        CallOutcome::Refuse {
            descriptor, limit, ..
        } => assert_eq!((descriptor, limit), (1, 2)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn recorded_keys_are_domain_entries_and_window_start() {
    for key in recorded::REDIS_KEYS {
        let (prefix, start) = key.rsplit_once('_').unwrap();
        assert!(prefix.starts_with("ratebound_bound_"), "{key}");
        let start: u64 = start.parse().unwrap();
        let window = if prefix.contains("installation") {
            86_400
        } else {
            3_600
        };
        assert_eq!(start % window, 0, "{key}: window start not aligned");
    }
}

// ---- outcome: every case -------------------------------------------------

#[test]
fn failed_calls_are_errors_with_their_grpc_code() {
    let ok_body = hex(recorded::OK_REMAINING_1);
    for (status, code) in [
        (14, GrpcCode::Unavailable),
        (4, GrpcCode::DeadlineExceeded),
        (recorded::GRPC_STATUS_REDIS_DOWN, GrpcCode::Unknown),
        (recorded::GRPC_STATUS_EMPTY_DESCRIPTORS, GrpcCode::Unknown),
        (13, GrpcCode::Internal),
        (99, GrpcCode::Other(99)),
    ] {
        // A body beside a failed status is not read.
        for body in [None, Some(ok_body.as_slice())] {
            assert_eq!(
                outcome(status, body, 1),
                CallOutcome::Error(RlsError::Grpc(code))
            );
        }
        assert_eq!(code.number(), status);
    }
    assert_eq!(
        RlsError::Grpc(GrpcCode::Unavailable).to_string(),
        "the rate-limit service call failed: gRPC status 14 (UNAVAILABLE)"
    );
}

#[test]
fn every_grpc_code_keeps_its_number() {
    for n in 0..=20 {
        assert_eq!(GrpcCode::from_wire(n).number(), n);
    }
}

#[test]
fn ok_status_without_or_with_a_bad_body_is_an_error() {
    assert_eq!(outcome(0, None, 1), CallOutcome::Error(RlsError::NoBody));
    // A truncated answer (a length past the end).
    let mut cut = hex(recorded::OK_REMAINING_1);
    cut.truncate(cut.len() - 2);
    assert!(matches!(
        outcome(0, Some(&cut), 1),
        CallOutcome::Error(RlsError::Decode(_))
    ));
    // Not protobuf at all: wire type 7 does not exist.
    assert!(matches!(
        outcome(0, Some(&[0x0f, 0xff]), 1),
        CallOutcome::Error(RlsError::Decode(_))
    ));
}

#[test]
fn overall_unknown_is_an_error() {
    // An empty message: every field at its default, overall UNKNOWN.
    assert_eq!(
        outcome(0, Some(&[]), 0),
        CallOutcome::Error(RlsError::OverallUnknown)
    );
    let unknown = proto::RateLimitResponse {
        overall_code: 0,
        statuses: vec![proto::DescriptorStatus::default()],
    };
    assert_eq!(
        outcome(0, Some(&unknown.encode_to_vec()), 1),
        CallOutcome::Error(RlsError::OverallUnknown)
    );
}

#[test]
fn codes_outside_the_enum_are_errors() {
    let overall = proto::RateLimitResponse {
        overall_code: 3,
        statuses: vec![],
    };
    assert_eq!(
        decode_answer(&overall.encode_to_vec()),
        Err(RlsError::UnknownCode(3))
    );
    let status = proto::RateLimitResponse {
        overall_code: 1,
        statuses: vec![proto::DescriptorStatus {
            code: -1,
            ..Default::default()
        }],
    };
    assert_eq!(
        outcome(0, Some(&status.encode_to_vec()), 1),
        CallOutcome::Error(RlsError::UnknownCode(-1))
    );
}

#[test]
fn a_status_count_other_than_the_descriptors_sent_is_an_error() {
    let two = hex(recorded::TWO_DESCRIPTORS);
    assert_eq!(
        outcome(0, Some(&two), 1),
        CallOutcome::Error(RlsError::StatusCount { sent: 1, got: 2 })
    );
    assert_eq!(
        outcome(0, Some(&hex(recorded::OK_REMAINING_1)), 3),
        CallOutcome::Error(RlsError::StatusCount { sent: 3, got: 1 })
    );
}

fn over(statuses: Vec<proto::DescriptorStatus>) -> Vec<u8> {
    proto::RateLimitResponse {
        overall_code: 2,
        statuses,
    }
    .encode_to_vec()
}

#[test]
fn over_limit_answers_missing_parts_are_errors() {
    let limit = Some(proto::RateLimit {
        requests_per_unit: 7,
        unit: 2,
        name: String::new(),
    });
    let reset = Some(proto::Duration {
        seconds: 30,
        nanos: 0,
    });
    // OVER_LIMIT overall, every descriptor OK.
    let none_over = over(vec![proto::DescriptorStatus {
        code: 1,
        current_limit: limit.clone(),
        limit_remaining: 3,
        duration_until_reset: reset.clone(),
    }]);
    assert_eq!(
        outcome(0, Some(&none_over), 1),
        CallOutcome::Error(RlsError::OverLimitWithoutDescriptor)
    );
    let no_limit = over(vec![proto::DescriptorStatus {
        code: 2,
        current_limit: None,
        limit_remaining: 0,
        duration_until_reset: reset,
    }]);
    assert_eq!(
        outcome(0, Some(&no_limit), 1),
        CallOutcome::Error(RlsError::MissingLimit { descriptor: 0 })
    );
    let no_reset = over(vec![
        proto::DescriptorStatus {
            code: 1,
            ..Default::default()
        },
        proto::DescriptorStatus {
            code: 2,
            current_limit: limit,
            limit_remaining: 0,
            duration_until_reset: None,
        },
    ]);
    assert_eq!(
        outcome(0, Some(&no_reset), 2),
        CallOutcome::Error(RlsError::MissingReset { descriptor: 1 })
    );
}

#[test]
fn first_descriptor_over_its_limit_is_the_one_named() {
    let status = |rpu, seconds| proto::DescriptorStatus {
        code: 2,
        current_limit: Some(proto::RateLimit {
            requests_per_unit: rpu,
            unit: 1,
            name: String::new(),
        }),
        limit_remaining: 0,
        duration_until_reset: Some(proto::Duration { seconds, nanos: 0 }),
    };
    let body = over(vec![
        proto::DescriptorStatus {
            code: 1,
            ..Default::default()
        },
        status(10, 5),
        status(20, 9),
    ]);
    match outcome(0, Some(&body), 3) {
        CallOutcome::Refuse {
            descriptor,
            limit,
            reset_s,
            statuses,
        } => assert_eq!((descriptor, limit, reset_s, statuses.len()), (1, 10, 5, 3)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn shadow_mode_answer_ok_over_a_descriptor_over_is_admitted() {
    // The service's SHADOW_MODE: overall OK, the status still OVER_LIMIT.
    let body = proto::RateLimitResponse {
        overall_code: 1,
        statuses: vec![proto::DescriptorStatus {
            code: 2,
            ..Default::default()
        }],
    }
    .encode_to_vec();
    assert!(matches!(
        outcome(0, Some(&body), 1),
        CallOutcome::Admit { statuses } if statuses[0].code == Code::OverLimit
    ));
}

#[test]
fn reset_rounds_up_to_whole_seconds_and_is_at_least_one() {
    let r = |seconds, nanos| reset_seconds(&proto::Duration { seconds, nanos });
    assert_eq!(r(30, 0), 30);
    assert_eq!(r(30, 1), 31);
    assert_eq!(r(0, 999_999_999), 1);
    assert_eq!(r(0, 0), 1);
    assert_eq!(r(-5, 0), 1);
    assert_eq!(r(i64::MAX, 1), i64::MAX as u64 + 1);
}

#[test]
fn answer_units_beyond_day_have_the_services_lengths() {
    assert_eq!(answer_unit_seconds(7), Some(7 * 86_400)); // week
    assert_eq!(answer_unit_seconds(5), Some(30 * 86_400)); // month
    assert_eq!(answer_unit_seconds(6), Some(365 * 86_400)); // year
    assert_eq!(answer_unit_seconds(0), None);
    assert_eq!(answer_unit_seconds(8), None);
}

#[test]
fn the_path_is_service_then_method() {
    assert_eq!(
        super::PATH,
        format!("/{}/{}", super::SERVICE, super::METHOD)
    );
}

#[test]
fn the_timeout_is_the_one_format_writes() {
    let mut buf = [0; 21];
    let mut cases: Vec<u64> = (0..=1_100).collect();
    for p in 1..20u32 {
        let t = 10u64.pow(p);
        cases.extend([t - 1, t, t + 1, t.saturating_mul(3).saturating_add(7)]);
    }
    cases.extend([u64::MAX, u64::MAX - 1, u64::MAX / 2]);
    for ms in cases {
        assert_eq!(super::grpc_timeout(ms, &mut buf), format!("{ms}m"));
    }
}

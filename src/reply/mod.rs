//! What a client is told: the quota fields in the configured profile,
//! Retry-After, and the body of a refusal (problem+json, or a gRPC status
//! with a retry delay for a gRPC caller). Rounding happens here, once.

pub mod grpc;
pub mod header_map;

use crate::count::window::Quota;

/// Which quota fields a response carries (the configuration's
/// `header_profile`, with `structured_headers`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Style {
    /// `RateLimit-Limit`, `-Remaining`, `-Reset` (what most clients read).
    #[default]
    RateLimit,
    /// The same and the IETF draft's structured `RateLimit-Policy` and
    /// `RateLimit`.
    RateLimitStructured,
    /// `X-RateLimit-Limit`, `-Remaining`, `-Reset` (seconds), as Envoy's own
    /// rate limit filters and many SDKs read them; `x-envoy-ratelimited` on
    /// a refusal.
    XRateLimit,
    /// Only the draft's structured pair: two fields instead of three.
    Draft,
}

/// Whole seconds, rounded up; never 0 (Retry-After 0 is an invitation).
pub fn seconds_up(ms: u64) -> u64 {
    ms.div_ceil(1_000).max(1)
}

/// The bound whose figures a response shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shown<'a> {
    pub bound: &'a str,
    /// What the quota counts, for a cost bound (`tokens`): the policy's
    /// `qu` parameter. Requests otherwise.
    pub unit: Option<&'a str>,
    pub window_ms: u64,
    pub quota: Quota,
    pub style: Style,
}

/// The quota fields of `s.style`, handed to `put` one by one:
/// `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (or their
/// `X-` forms), and the structured `RateLimit-Policy: "name";q=100;w=60`
/// and `RateLimit: "name";r=0;t=17` (RFC 8941 strings; bound names need no
/// escaping: they are `[A-Za-z0-9_.-]`), the policy with `qu="tokens"`
/// for a cost bound (its unit: letters only). Each value is written into one
/// stack buffer: no allocation on the path of every admitted request.
pub(crate) fn each_quota_header(s: &Shown, mut put: impl FnMut(&'static str, &str)) {
    let q = &s.quota;
    let reset = seconds_up(q.reset_ms);
    let plain = match s.style {
        Style::RateLimit | Style::RateLimitStructured => {
            Some(["ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"])
        }
        Style::XRateLimit => Some([
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
            "x-ratelimit-reset",
        ]),
        Style::Draft => None,
    };
    if let Some([limit, remaining, reset_name]) = plain {
        put(limit, Digits::of(q.limit.into()).as_str());
        put(remaining, Digits::of(q.remaining.into()).as_str());
        put(reset_name, Digits::of(reset).as_str());
    }
    if matches!(s.style, Style::RateLimitStructured | Style::Draft) {
        let mut buf = Buf::default();
        let w = s.window_ms / 1_000;
        match s.unit {
            Some(u) => {
                let policy = format_args!("\"{}\";q={};qu=\"{u}\";w={w}", s.bound, q.limit);
                put("ratelimit-policy", buf.show(policy));
            }
            None => {
                let policy = format_args!("\"{}\";q={};w={w}", s.bound, q.limit);
                put("ratelimit-policy", buf.show(policy));
            }
        }
        let now = format_args!("\"{}\";r={};t={reset}", s.bound, q.remaining);
        put("ratelimit", buf.show(now));
    }
}

/// A number's decimal digits on the stack: the three plain fields of every
/// admitted response need no formatter.
struct Digits {
    bytes: [u8; 20],
    start: usize,
}

impl Digits {
    fn of(mut n: u64) -> Digits {
        let mut d = Digits {
            bytes: [b'0'; 20],
            start: 20,
        };
        loop {
            d.start -= 1;
            if let Some(b) = d.bytes.get_mut(d.start) {
                *b = b'0' + (n % 10) as u8;
            }
            n /= 10;
            if n == 0 {
                return d;
            }
        }
    }

    fn as_str(&self) -> &str {
        std::str::from_utf8(self.bytes.get(self.start..).unwrap_or_default()).unwrap_or_default()
    }
}

/// A value rendered on the stack. Names shown are at most 129 characters
/// (`<operation>.<bound>`, each 1-64) and numbers at most 20 digits, so
/// every field fits; a longer one would be cut, never overflow.
struct Buf {
    bytes: [u8; 192],
    len: usize,
}

impl Default for Buf {
    fn default() -> Self {
        Buf {
            bytes: [0; 192],
            len: 0,
        }
    }
}

impl std::fmt::Write for Buf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let room = self.bytes.len() - self.len;
        let take = s.len().min(room);
        if let (Some(to), Some(from)) = (
            self.bytes.get_mut(self.len..self.len + take),
            s.as_bytes().get(..take),
        ) {
            to.copy_from_slice(from);
        }
        self.len += take;
        if take < s.len() {
            Err(std::fmt::Error)
        } else {
            Ok(())
        }
    }
}

impl Buf {
    fn show(&mut self, args: std::fmt::Arguments) -> &str {
        self.len = 0;
        let _ = std::fmt::Write::write_fmt(self, args);
        // Cut only at a character boundary (names are ASCII anyway).
        let shown = self.bytes.get(..self.len).unwrap_or_default();
        match std::str::from_utf8(shown) {
            Ok(s) => s,
            Err(e) => std::str::from_utf8(shown.get(..e.valid_up_to()).unwrap_or_default())
                .unwrap_or_default(),
        }
    }
}

/// A 429's headers and problem+json body, written into buffers kept from
/// one refusal to the next: once warm, refusing allocates nothing here.
#[derive(Debug, Default)]
pub struct Refusal {
    /// Header values end to end; `fields` says where each one ends.
    values: String,
    fields: Vec<(&'static str, usize)>,
    body: String,
    /// What access logs show (`%RESPONSE_CODE_DETAILS%`).
    details: String,
}

impl Refusal {
    /// The quota of the refusing bound, Retry-After equal to its reset (so
    /// never earlier than the structured `t`), and a short RFC 9457 body
    /// naming the route and bound. Route and bound names are
    /// `[A-Za-z0-9_.-]`: nothing to escape.
    ///
    /// For a gRPC caller (`grpc`: the gRPC status to answer with) the body
    /// is the detail alone (Envoy sends it as `grpc-message`), and
    /// `grpc-status-details-bin` carries a `google.rpc.RetryInfo` with the
    /// same delay as Retry-After.
    pub fn render(&mut self, s: &Shown, route: &str, grpc: Option<u32>) {
        let (values, fields) = (&mut self.values, &mut self.fields);
        values.clear();
        fields.clear();
        let mut put = |k: &'static str, v: &str| {
            values.push_str(v);
            fields.push((k, values.len()));
        };
        each_quota_header(s, &mut put);
        let retry_s = seconds_up(s.quota.reset_ms);
        let retry = Digits::of(retry_s);
        put("retry-after", retry.as_str());
        if s.style == Style::XRateLimit {
            put("x-envoy-ratelimited", "true");
        }
        let d = &mut self.details;
        d.clear();
        for part in ["ratebound.refused:", route, "/", s.bound] {
            d.push_str(part);
        }
        let limit = Digits::of(s.quota.limit.into());
        let detail = [
            "rate limit ",
            route,
            "/",
            s.bound,
            " (",
            limit.as_str(),
            if s.unit.is_some() { " " } else { "" },
            s.unit.unwrap_or_default(),
            " per window) reached; retry in ",
            retry.as_str(),
            " s",
        ];
        let b = &mut self.body;
        b.clear();
        if let Some(code) = grpc {
            detail.iter().for_each(|part| b.push_str(part));
            put(
                "grpc-status-details-bin",
                &grpc::status_details(code, b, retry_s),
            );
            return;
        }
        put("content-type", "application/problem+json");
        b.push_str(r#"{"type":"about:blank","title":"Too Many Requests","status":429,"detail":""#);
        detail.iter().for_each(|part| b.push_str(part));
        for part in [
            r#"","route":""#,
            route,
            r#"","bound":""#,
            s.bound,
            r#"","retry_after":"#,
            retry.as_str(),
            "}",
        ] {
            b.push_str(part);
        }
    }

    pub fn headers(&self) -> impl Iterator<Item = (&'static str, &str)> {
        let mut start = 0;
        self.fields.iter().map(move |&(k, end)| {
            let v = self.values.get(start..end).unwrap_or_default();
            start = end;
            (k, v)
        })
    }

    pub fn body(&self) -> &str {
        &self.body
    }

    pub fn details(&self) -> &str {
        &self.details
    }
}

/// The 503 body when an installation bound could not be checked: no bound
/// was exceeded, so not a 429.
pub(crate) fn unchecked_body(route: &str, bound: &str) -> String {
    format!(
        r#"{{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"rate limit {route}/{bound} could not be checked; retry in 1 s","route":"{route}","bound":"{bound}","retry_after":1}}"#
    )
}

/// The body of a sign-in refused because its account cannot be read with
/// certainty (400, 413 or 415): why, and how to send it.
pub(crate) fn unreadable_body(route: &str, status: u16, reason: &str, detail: &str) -> String {
    let title = match status {
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        _ => "Bad Request",
    };
    let detail = serde_json::Value::from(detail);
    format!(
        r#"{{"type":"about:blank","title":"{title}","status":{status},"detail":{detail},"route":"{route}","reason":"{reason}"}}"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_fields_are_off_unless_asked_for() {
        let shown = Shown {
            bound: "b",
            unit: None,
            window_ms: 1_000,
            quota: Quota {
                limit: 1,
                remaining: 1,
                reset_ms: 1,
            },
            style: Style::RateLimit,
        };
        let mut n = 0;
        each_quota_header(&shown, |_, _| n += 1);
        assert_eq!(n, 3);
    }

    #[test]
    fn retry_after_rounds_up_and_is_never_zero() {
        assert_eq!(seconds_up(0), 1);
        assert_eq!(seconds_up(1), 1);
        assert_eq!(seconds_up(1_000), 1);
        assert_eq!(seconds_up(1_001), 2);
    }

    #[test]
    fn refusal_carries_four_fields_consistent_with_each_other() {
        let q = Quota {
            limit: 5,
            remaining: 0,
            reset_ms: 12_345,
        };
        let shown = Shown {
            bound: "per_address",
            unit: None,
            window_ms: 60_000,
            quota: q,
            style: Style::RateLimitStructured,
        };
        let mut r = Refusal::default();
        // Rendered twice: what the first left behind must not show.
        r.render(
            &Shown {
                bound: "a_much_longer_bound_name",
                unit: None,
                window_ms: 3_600_000,
                quota: Quota {
                    limit: 123_456,
                    remaining: 0,
                    reset_ms: 999_999_999,
                },
                style: Style::RateLimitStructured,
            },
            "a_longer_route",
            None,
        );
        r.render(&shown, "r", None);
        let h: Vec<_> = r.headers().collect();
        assert_eq!(h.len(), 7);
        let get = |n: &str| h.iter().find(|(k, _)| *k == n).map(|(_, v)| *v);
        assert_eq!(get("ratelimit-policy"), Some(r#""per_address";q=5;w=60"#));
        assert_eq!(get("ratelimit"), Some(r#""per_address";r=0;t=13"#));
        assert_eq!(get("ratelimit-limit"), Some("5"));
        assert_eq!(get("ratelimit-remaining"), Some("0"));
        assert_eq!(get("ratelimit-reset"), Some("13"));
        assert_eq!(get("retry-after"), Some("13"));
        assert_eq!(get("content-type"), Some("application/problem+json"));
        let body: serde_json::Value = serde_json::from_str(r.body()).unwrap();
        assert_eq!(body["status"], 429);
        assert_eq!(body["retry_after"], 13);
        // A cost bound names its unit: the policy's `qu`, the detail's words.
        let tokens = Shown {
            unit: Some("tokens"),
            ..shown
        };
        let mut t = Refusal::default();
        t.render(&tokens, "r", None);
        let h: Vec<_> = t.headers().collect();
        let get = |n: &str| h.iter().find(|(k, _)| *k == n).map(|(_, v)| *v);
        assert_eq!(
            get("ratelimit-policy"),
            Some(r#""per_address";q=5;qu="tokens";w=60"#)
        );
        assert!(t.body().contains("(5 tokens per window)"), "{}", t.body());
        assert_eq!(body["route"], "r");
        assert_eq!(body["bound"], "per_address");
        assert_eq!(
            body["detail"],
            "rate limit r/per_address (5 per window) reached; retry in 13 s"
        );
    }

    #[test]
    fn each_profile_has_its_fields() {
        let names = |style| {
            let shown = Shown {
                bound: "b",
                unit: None,
                window_ms: 60_000,
                quota: Quota {
                    limit: 5,
                    remaining: 0,
                    reset_ms: 2_000,
                },
                style,
            };
            let mut r = Refusal::default();
            r.render(&shown, "r", None);
            r.headers().map(|(k, _)| k).collect::<Vec<_>>()
        };
        assert_eq!(
            names(Style::XRateLimit),
            [
                "x-ratelimit-limit",
                "x-ratelimit-remaining",
                "x-ratelimit-reset",
                "retry-after",
                "x-envoy-ratelimited",
                "content-type"
            ]
        );
        assert_eq!(
            names(Style::Draft),
            [
                "ratelimit-policy",
                "ratelimit",
                "retry-after",
                "content-type"
            ]
        );
        assert_eq!(
            names(Style::RateLimit),
            [
                "ratelimit-limit",
                "ratelimit-remaining",
                "ratelimit-reset",
                "retry-after",
                "content-type"
            ]
        );
    }

    #[test]
    fn a_grpc_refusal_carries_the_delay_in_its_status_details_and_no_json() {
        let shown = Shown {
            bound: "b",
            unit: None,
            window_ms: 60_000,
            quota: Quota {
                limit: 5,
                remaining: 0,
                reset_ms: 7_000,
            },
            style: Style::RateLimit,
        };
        let mut r = Refusal::default();
        r.render(&shown, "r", Some(grpc::RESOURCE_EXHAUSTED));
        let h: Vec<_> = r.headers().collect();
        assert!(h.iter().any(|(k, _)| *k == "grpc-status-details-bin"));
        assert!(!h.iter().any(|(k, _)| *k == "content-type"));
        assert_eq!(
            r.body(),
            "rate limit r/b (5 per window) reached; retry in 7 s"
        );
        assert_eq!(r.details(), "ratebound.refused:r/b");
    }

    #[test]
    fn digits_are_decimal() {
        for n in [0, 1, 9, 10, 99, 100, 12_345, u64::from(u32::MAX), u64::MAX] {
            assert_eq!(Digits::of(n).as_str(), n.to_string());
        }
    }

    #[test]
    fn the_longest_name_and_numbers_are_shown_whole() {
        let name = format!("{}.{}", "o".repeat(64), "b".repeat(64));
        let shown = Shown {
            bound: &name,
            unit: None,
            window_ms: 86_400_000,
            quota: Quota {
                limit: u32::MAX,
                remaining: u32::MAX,
                reset_ms: u64::MAX,
            },
            style: Style::RateLimitStructured,
        };
        let mut h: Vec<(&str, String)> = vec![];
        each_quota_header(&shown, |k, v| h.push((k, v.to_string())));
        let reset = u64::MAX.div_ceil(1_000);
        assert_eq!(
            h.iter()
                .find(|(k, _)| *k == "ratelimit")
                .map(|(_, v)| v.clone()),
            Some(format!("\"{name}\";r={};t={reset}", u32::MAX))
        );
        assert_eq!(
            h.iter()
                .find(|(k, _)| *k == "ratelimit-policy")
                .map(|(_, v)| v.clone()),
            Some(format!("\"{name}\";q={};w=86400", u32::MAX))
        );
    }
}

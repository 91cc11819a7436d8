//! Host calls per request, by kind, for the configurations `bench/run.sh`
//! times (variants 4, 5 and 6), held to budgets: most of a request's cost
//! is its host calls, and counting them is deterministic where timing is
//! not. A change that adds one fails here before any bench is run.
//!
//! Run with `--nocapture` for the table.

use super::super::mock::{Filter, MockHost};
use std::fmt;

/// What one request asked of the host, on average over a steady run.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Calls {
    property: f64,
    header: f64,
    store_get: f64,
    store_set: f64,
    response_header: f64,
    reply: f64,
}

impl fmt::Display for Calls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "| {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            self.property,
            self.header,
            self.store_get,
            self.store_set,
            self.response_header,
            self.reply
        )
    }
}

impl Calls {
    fn total(&self) -> f64 {
        self.property
            + self.header
            + self.store_get
            + self.store_set
            + self.response_header
            + self.reply
    }

    /// Every kind at or under `budget`'s.
    fn within(&self, budget: &Calls) -> bool {
        let pairs = [
            (self.property, budget.property),
            (self.header, budget.header),
            (self.store_get, budget.store_get),
            (self.store_set, budget.store_set),
            (self.response_header, budget.response_header),
            (self.reply, budget.reply),
        ];
        pairs.iter().all(|(got, max)| got <= max)
    }
}

const T0: u64 = 600_000;
const STEADY: u32 = 50;

/// `STEADY` requests after a warm-up, one a millisecond, from one caller:
/// the host calls of each, on average.
fn measure(json: &str, prepare: impl Fn(MockHost) -> MockHost) -> Calls {
    let mut host = prepare(MockHost::new(T0).from_address("10.1.2.3"));
    let f = Filter::new(&host.store, json).unwrap();
    for _ in 0..3 {
        f.request(&mut host);
        host.now += 1;
    }
    host.clear();
    let (gets, sets) = (host.store.reads(), host.store.writes());
    let mut replies = 0;
    for _ in 0..STEADY {
        f.request(&mut host);
        replies += host.replies.len();
        host.replies.clear();
        host.now += 1;
    }
    let n = f64::from(STEADY);
    let per = |k: usize| k as f64 / n;
    Calls {
        property: per(host.property_reads.get()),
        header: per(host.header_reads.get()),
        store_get: per(host.store.reads() - gets),
        store_set: per(host.store.writes() - sets),
        response_header: per(host.response_headers.len()),
        reply: per(replies),
    }
}

/// A token whose own claims are the ones jwt_authn verified (its `sub`),
/// so that the worker remembers it (`sources::from_jwt`).
fn token(sub: &str) -> String {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    format!(
        "{}.{}.sig",
        b64(r#"{"alg":"RS256"}"#),
        b64(&format!(r#"{{"sub":"{sub}","exp":4102444800}}"#))
    )
}

/// A request bearing `sub`'s token, which jwt_authn verified (its claim
/// in the metadata).
fn verified(h: MockHost, sub: &str) -> MockHost {
    let path = "metadata.filter_metadata.envoy.filters.http.jwt_authn.payload.sub";
    let mut h = h.header("authorization", &format!("Bearer {}", token(sub)));
    h.properties.insert(path.into(), sub.as_bytes().to_vec());
    h
}

const ONE_ADDRESS: &str = r#"{"instance":"bench","routes":[{"name":"all","bounds":[
    {"name":"addr","per":"address","limit":1000000000,"window":"PT1M"}]}]}"#;
const THREE_JWT: &str = r#"{"instance":"bench3",
    "identity":{"jwt":{"metadata_key":"payload","user_claim":"sub"}},
    "routes":[{"name":"all","bounds":[
      {"name":"route","per":"route","limit":4000000000,"window":"PT1M"},
      {"name":"addr","per":"address","limit":1000000000,"window":"PT1M"},
      {"name":"user","per":"user","limit":1000000000,"window":"PT1M"}]}]}"#;
const REFUSING: &str = r#"{"instance":"benchrefuse","routes":[{"name":"all","bounds":[
    {"name":"addr","per":"address","limit":1,"window":"P1D"}]}]}"#;

/// Budgets: what each variant asks of the host today, per request.
/// Lowering one is progress (lower the budget with it); raising one needs
/// a reason in its commit.
const BUDGETS: [(&str, Calls); 3] = [
    (
        "4: one address bound, admitted",
        Calls {
            property: 1.0,
            header: 0.0,
            store_get: 0.0,
            store_set: 1.0,
            response_header: 3.0,
            reply: 0.0,
        },
    ),
    (
        "5: route + address + JWT user",
        Calls {
            property: 1.0,
            header: 1.0,
            store_get: 0.0,
            store_set: 3.0,
            response_header: 3.0,
            reply: 0.0,
        },
    ),
    (
        "6: refusing (the refusal remembered)",
        Calls {
            property: 1.0,
            header: 1.0,
            store_get: 0.0,
            store_set: 0.0,
            response_header: 0.0,
            reply: 1.0,
        },
    ),
];

#[test]
fn host_calls_per_request_stay_within_their_budgets() {
    let sub = "bench-user";
    let measured = [
        measure(ONE_ADDRESS, |h| h),
        measure(THREE_JWT, |h| verified(h, sub)),
        measure(REFUSING, |h| h),
    ];
    println!(
        "| variant | property | header | store get | store set | response header | reply | total |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for ((name, _), got) in BUDGETS.iter().zip(&measured) {
        println!("| {name} {got} {:.2} |", got.total());
    }
    for ((name, budget), got) in BUDGETS.iter().zip(&measured) {
        assert!(got.within(budget), "{name}: {got} over its budget {budget}");
    }
}

/// With the token memory off (`cache_ttl_s` 0), a JWT user costs its
/// verified claim's read and no read of the token's header: the header is
/// read only to key the memory.
#[test]
fn without_a_token_memory_the_token_header_is_not_read() {
    let sub = "bench-user";
    let json = THREE_JWT.replace(
        r#""user_claim":"sub""#,
        r#""user_claim":"sub","cache_ttl_s":0"#,
    );
    let got = measure(&json, |h| verified(h, sub));
    assert_eq!((got.header, got.property), (0.0, 2.0), "{got}");
}

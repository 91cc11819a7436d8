//! The configurations the meter runs: `bench/benchlib.py`'s, as JSON, and
//! the scaling rows'.

/// A configuration with one route, "all", and these bounds (JSON objects).
pub fn config(instance: &str, bounds: &[String], identity: Option<&str>) -> String {
    let identity = identity.map_or(String::new(), |i| format!(r#""identity":{i},"#));
    format!(
        r#"{{"instance":"{instance}",{identity}"routes":[{{"name":"all","bounds":[{}]}}]}}"#,
        bounds.join(",")
    )
}

pub fn bound(name: &str, per: &str, limit: u64, window: &str) -> String {
    format!(r#"{{"name":"{name}","per":"{per}","limit":{limit},"window":"{window}"}}"#)
}

/// bench/benchlib.py's CFG_ONE_ADDRESS (variant 4).
pub fn one_address() -> String {
    config(
        "bench",
        &[bound("addr", "address", 1_000_000_000, "PT1M")],
        None,
    )
}

/// bench/benchlib.py's CFG_THREE_BOUNDS (variant 5): the user is the `sub`
/// jwt_authn verified, from its metadata under `payload`.
pub fn three_bounds() -> String {
    config(
        "bench3",
        &[
            bound("route", "route", 4_000_000_000, "PT1M"),
            bound("addr", "address", 1_000_000_000, "PT1M"),
            bound("user", "user", 1_000_000_000, "PT1M"),
        ],
        Some(r#"{"jwt":{"metadata_key":"payload","user_claim":"sub"}}"#),
    )
}

/// bench/benchlib.py's CFG_REFUSING (variant 6): after the first request
/// every one is refused.
pub fn refusing() -> String {
    config("benchrefuse", &[bound("addr", "address", 1, "P1D")], None)
}

/// Tiers on one key: 10 a second, 300 a minute and 5,000 an hour per
/// address, as people write them, with limits nothing reaches (one shared
/// entry, one write; issue 41).
pub fn tiers() -> String {
    config(
        "tiers3",
        &[
            bound("second", "address", 1_000_000_000, "PT1S"),
            bound("minute", "address", 1_000_000_000, "PT1M"),
            bound("hour", "address", 1_000_000_000, "PT1H"),
        ],
        None,
    )
}

/// The same tiers refusing: the day's one request taken, every later one
/// is refused by the last tier (`tiers` with a day of 1 after it).
pub fn tiers_refusing() -> String {
    config(
        "tiers3refuse",
        &[
            bound("second", "address", 1_000_000_000, "PT1S"),
            bound("minute", "address", 1_000_000_000, "PT1M"),
            bound("day", "address", 1, "P1D"),
        ],
        None,
    )
}

/// `n` address bounds on the route, each its own name and window.
pub fn address_bounds(n: usize) -> String {
    let bounds: Vec<String> = (0..n)
        .map(|i| {
            bound(
                &format!("addr{i}"),
                "address",
                1_000_000_000,
                &format!("PT{}M", i + 1),
            )
        })
        .collect();
    config(&format!("bounds{n}"), &bounds, None)
}

/// bench/benchlib.py's cost bounds (variants 51, 53, 54, 55): one bound
/// per address counting `cost` (a JSON object), a limit nothing reaches.
pub fn cost(instance: &str, cost: &str) -> String {
    let bound = format!(
        r#"{{"name":"tokens","per":"address","limit":1000000000,"window":"PT1M","cost":{cost}}}"#
    );
    config(instance, &[bound], None)
}

/// bench/benchlib.py's CHAT_JSON: an OpenAI-style answer, 300 tokens used.
pub const CHAT_JSON: &str = r#"{"id":"chatcmpl-bench","object":"chat.completion","created":1764633600,"model":"bench-model","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Hello! How can I help you today?"}}],"usage":{"prompt_tokens":12,"completion_tokens":288,"total_tokens":300}}"#;

/// bench/benchlib.py's CHAT_SSE, an event a chunk: nine deltas, the usage,
/// `[DONE]`.
pub fn chat_stream() -> Vec<Vec<u8>> {
    let words = [
        "Hello", "!", " How", " can", " I", " help", " you", " today", "?",
    ];
    let mut events: Vec<String> = words
        .iter()
        .map(|w| {
            format!(
                r#"{{"id":"chatcmpl-bench","object":"chat.completion.chunk","model":"bench-model","choices":[{{"index":0,"delta":{{"content":"{w}"}},"finish_reason":null}}],"usage":null}}"#
            )
        })
        .collect();
    events.push(r#"{"id":"chatcmpl-bench","object":"chat.completion.chunk","model":"bench-model","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":288,"total_tokens":300}}"#.to_string());
    events.push("[DONE]".to_string());
    events
        .into_iter()
        .map(|e| format!("data: {e}\n\n").into_bytes())
        .collect()
}

/// The meter's long stream: `n` one-token events (an event a chunk), the
/// usage, `[DONE]` (meter/tests/budgets.rs, the largest answers).
pub fn one_token_stream(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"t{}\"}}}}],\"usage\":null}}\n\n",
                i % 10
            )
            .into_bytes()
        })
        .chain([
            b"data: {\"choices\":[],\"usage\":{\"total_tokens\":1012}}\n\n".to_vec(),
            b"data: [DONE]\n\n".to_vec(),
        ])
        .collect()
}

/// bench/signin.py's variants F and S: the sign-in route with an
/// installation bound alone (`shape` fixed or sliding), the account from
/// the header X-Login, counted by the rate-limit service `rls`.
pub fn signin(shape: &str) -> String {
    format!(
        r#"{{"instance":"signin","rate_limit_service":{{"cluster":"rls","domain":"benchsignin","timeout_ms":1000,"on_error":"deny"}},"routes":[{{"name":"login","account":{{"header":"x-login"}},"bounds":[{{"name":"attempts","per":"account","scope":"installation","shape":"{shape}","limit":1000000000,"window":"PT1M"}}]}}]}}"#
    )
}

/// A length-delimited protobuf field.
fn field(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// envoyproxy/ratelimit's answer admitting a call: overall OK, and per
/// descriptor OK with its limit (per minute), what remains and 30 s to the
/// window's end, as the service writes them.
pub fn rls_answer(statuses: &[(u32, u32)]) -> Vec<u8> {
    let mut msg = vec![0x08, 1];
    for &(limit, remaining) in statuses {
        let mut rate = vec![0x08];
        varint(&mut rate, u64::from(limit));
        rate.extend([0x10, 2]);
        let mut status = vec![0x08, 1];
        field(&mut status, 0x12, &rate);
        status.push(0x18);
        varint(&mut status, u64::from(remaining));
        field(&mut status, 0x22, &[0x08, 30]);
        field(&mut msg, 0x12, &status);
    }
    msg
}

//! The filter's side of the chat-request oracle (tests/oracle/chat): reads
//! one base64 request body a line on stdin, sends each through the
//! filter's whole request path (the pipeline over the mock host, a route
//! whose cost is `/usage/total_tokens`, reserving what the request allows
//! itself), and answers one JSON line each:
//!
//! - `{"refused": "<reason>", "status": <status>}`, or
//! - `{"sent_b64": "<the body the upstream receives>", "reserved": N,
//!   "asked": <the filter asked for the usage>}`.
//!
//! `cargo run --example chat_oracle < bodies.txt`

use base64::Engine;
use ratebound::pipeline::mock::{Filter, MockHost};
use serde_json::{json, Value};
use std::io::{BufRead, Write};

/// A limit no reservation reaches: what is reserved is what the request
/// allowed itself, never cut to the limit.
const CONFIG: &str = r#"{"routes":[{"name":"chat","bounds":[
  {"name":"tokens","per":"address","limit":4000000000,"window":"PT1H",
   "cost":{"response_json":"/usage/total_tokens","unit":"tokens"}}]}]}"#;

fn decide(body: Vec<u8>) -> Value {
    let store = ratebound::count::store::MemStore::default();
    let f = match Filter::new(&store, CONFIG) {
        Ok(f) => f,
        Err(e) => return json!({ "error": e.to_string() }),
    };
    let mut host = MockHost::new(1_800_000_000_000).from_address("10.0.0.1");
    host.request_headers.insert(":method".into(), "POST".into());
    host.request_headers
        .insert("content-type".into(), "application/json".into());
    host.request_body = Some(body);
    f.request(&mut host);
    if let Some(r) = host.replies.first() {
        let reason = serde_json::from_str::<Value>(&r.body)
            .ok()
            .and_then(|b| b.get("reason").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| r.details.clone());
        return json!({"refused": reason, "status": r.status});
    }
    let sent = host.request_body.clone().unwrap_or_default();
    let count = f.count_of(&host.store, "10.0.0.1").unwrap_or(0);
    json!({
        "sent_b64": base64::engine::general_purpose::STANDARD.encode(sent),
        "reserved": count,
        "asked": host.request_body_set > 0,
    })
}

fn main() -> std::io::Result<()> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let answer = match base64::engine::general_purpose::STANDARD.decode(line.trim()) {
            Ok(body) => decide(body),
            Err(_) => json!({"error": "not base64"}),
        };
        writeln!(out, "{answer}")?;
        out.flush()?;
    }
    Ok(())
}

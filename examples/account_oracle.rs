//! The filter's side of the account oracle (tests/oracle): reads JSON lines
//! on stdin and answers one line each with what the filter does.
//!
//! - `{"fold": "<name>"}`: the key a sign-in naming `<name>` is counted
//!   under (the one member of a JSON sign-in's body);
//! - `{"place": "json"|"form"|"header", "path": "/up/login?…",
//!   "headers": [["name", "value"], …], "body_b64": "…"}` (each header
//!   value's characters are its bytes, latin-1): one sign-in
//!   request through the filter's whole request path (the pipeline over the
//!   mock host, a rate-limit service that counts and admits).
//!
//! Each answer is `{"key": "<the account's descriptor value>"}` (a keyed
//! hash: two answers name one counter exactly when their keys are equal)
//! or `{"refused": "<reason>", "status": <status>}`.
//!
//! `cargo run --example account_oracle < requests.jsonl`

use base64::Engine;
use prost::Message;
use ratebound::pipeline::mock::{Filter, MockHost};
use ratebound::rls::proto;
use serde_json::{json, Value};
use std::io::{BufRead, Write};

/// The routes of tests/oracle (and of its sample end to end,
/// tests/e2e/test_oracle_sample.py): one per carrier, an installation
/// bound per account.
const CONFIG: &str = include_str!("../tests/oracle/routes.json");

/// One sign-in through the pipeline: what the filter did with it.
fn decide(f: &Filter, path: &str, headers: &[(String, String)], body: Option<Vec<u8>>) -> Value {
    let mut host = MockHost::new(1_800_000_000_000).from_address("10.0.0.1");
    host.request_headers.insert(":method".into(), "POST".into());
    host.request_headers.insert(":path".into(), path.into());
    for (k, v) in headers {
        let k = k.to_ascii_lowercase();
        // Header values are bytes, written as latin-1 characters.
        let bytes: Vec<u8> = v.chars().map(|c| c as u32 as u8).collect();
        match String::from_utf8(bytes) {
            Ok(v) if !host.request_headers.contains_key(&k) => {
                host.request_headers.insert(k, v);
            }
            Ok(v) => host.repeated_headers.push((k, v)),
            Err(e) => host.byte_headers.push((k, e.into_bytes())),
        }
    }
    host.request_body = body;
    // A service that counts as envoyproxy/ratelimit does, fresh for each
    // sign-in: it answers every descriptor the bound sends, and admits.
    host.counting_service = Some(Default::default());
    f.request(&mut host);
    if let Some(r) = host.replies.first() {
        let reason = serde_json::from_str::<Value>(&r.body)
            .ok()
            .and_then(|b| b.get("reason").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| r.details.clone());
        return json!({"refused": reason, "status": r.status});
    }
    let Some((_, _, message)) = host.service_calls.first() else {
        return json!({"refused": "not_a_sign_in", "status": 0});
    };
    let key = proto::RateLimitRequest::decode(message.as_slice())
        .ok()
        .and_then(|m| {
            m.descriptors
                .into_iter()
                .flat_map(|d| d.entries)
                .find(|e| e.key == "account")
                .map(|e| e.value)
        });
    match key {
        Some(k) => json!({ "key": k }),
        None => json!({"refused": "no_account_sent", "status": 0}),
    }
}

fn answer(f: &Filter, line: &str) -> Value {
    let Ok(v) = serde_json::from_str::<Value>(line) else {
        return json!({"error": "not JSON"});
    };
    if let Some(name) = v.get("fold").and_then(Value::as_str) {
        let headers = [("content-type".to_string(), "application/json".to_string())];
        let body = json!({ "username": name }).to_string().into_bytes();
        return decide(f, "/up/login", &headers, Some(body));
    }
    let path = v.get("path").and_then(Value::as_str).unwrap_or("/up/login");
    let headers: Vec<(String, String)> = v
        .get("headers")
        .and_then(Value::as_array)
        .map(|hs| {
            hs.iter()
                .filter_map(|h| Some((h.get(0)?.as_str()?.into(), h.get(1)?.as_str()?.into())))
                .collect()
        })
        .unwrap_or_default();
    let body = v
        .get("body_b64")
        .and_then(Value::as_str)
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
    decide(f, path, &headers, body.filter(|b| !b.is_empty()))
}

fn main() -> std::io::Result<()> {
    let store = ratebound::count::store::MemStore::default();
    let f = match Filter::new(&store, CONFIG) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("account_oracle: {e}");
            std::process::exit(2);
        }
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        writeln!(out, "{}", answer(&f, &line))?;
        out.flush()?;
    }
    Ok(())
}

//! Issue 37: a route whose cost its answer names reads the request body
//! before admission. Every shape a caller might send to move its request
//! off its counter: a field named twice, a body that is not JSON, too
//! large, compressed, or in UTF-16 is refused with why and counts nothing;
//! a stream that did not ask for its usage is made to, and does not see it.
#![cfg(all(test, not(target_arch = "wasm32")))]
#![allow(clippy::indexing_slicing)]

use crate::pipeline::mock::{Filter, MockHost};
use crate::pipeline::{Exchange, Step, WaitFor};
use crate::stats::Stat;

const T0: u64 = 600_000;

fn config(extra: &str) -> String {
    format!(
        r#"{{{extra}"routes":[{{"name":"llm","bounds":[
        {{"name":"tokens","per":"address","limit":1000,"window":"PT1H",
         "cost":{{"response_json":"/usage/total_tokens","max_request_bytes":2048}}}}]}}]}}"#
    )
}

fn host(body: &[u8]) -> MockHost {
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    host.request_body = Some(body.to_vec());
    host.request_headers
        .insert("content-length".into(), body.len().to_string());
    host
}

#[test]
fn a_body_that_cannot_be_read_with_certainty_is_refused_and_counts_nothing() {
    let utf16: Vec<u8> = r#"{"stream":true}"#.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let mut big = br#"{"messages":""#.to_vec();
    big.extend(vec![b'x'; 3000]);
    big.extend(br#""}"#);
    for (body, encoding, status, reason) in [
        (
            br#"{"stream":false,"stream":true}"#.to_vec(),
            None,
            400,
            "ambiguous",
        ),
        (
            br#"{"max_tokens":1,"max_tokens":900}"#.to_vec(),
            None,
            400,
            "ambiguous",
        ),
        (br#"{"stream":true,"#.to_vec(), None, 400, "not_json"),
        (utf16, None, 415, "not_utf8"),
        (big, None, 413, "too_large"),
        (br#"{"stream":true}"#.to_vec(), Some("gzip"), 415, "encoded"),
    ] {
        let f = Filter::new(&MockHost::new(T0).store, &config("")).unwrap();
        let mut host = host(&body);
        if let Some(e) = encoding {
            host.request_headers
                .insert("content-encoding".into(), e.into());
        }
        f.request(&mut host);
        let reply = host.replies.last().expect("a reply");
        assert_eq!(reply.status, status, "{reason}");
        assert!(
            reply.body.contains(&format!(r#""reason":"{reason}""#)),
            "{}",
            reply.body
        );
        assert_eq!(host.counted(Stat::RequestsUnclear), 1);
        assert!(host.events.is_empty(), "{reason}: no bound counted");
    }
}

#[test]
fn a_stream_is_made_to_ask_for_its_usage_and_its_caller_does_not_see_it() {
    let f = Filter::new(&MockHost::new(T0).store, &config("")).unwrap();
    let body = br#"{"model":"m","stream":true,"stream_options":{"include_usage":false}}"#;
    let mut host = host(body);
    host.upstream_headers
        .insert("content-type".into(), "text/event-stream".into());
    host.upstream_headers
        .insert("content-length".into(), "999".into());
    let content =
        b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n";
    let usage = b"data: {\"choices\":[],\"usage\":{\"total_tokens\":42}}\n\n";
    host.upstream_body = vec![content.to_vec(), usage[..20].to_vec(), usage[20..].to_vec()];
    host.upstream_body.push(b"data: [DONE]\n\n".to_vec());
    let (first, last) = f.request(&mut host);
    assert_eq!((first, last), (Step::Continue, Some(Step::Continue)));
    // The upstream was asked; the length sent on with the headers was taken
    // off (the body it named changed).
    let sent: serde_json::Value =
        serde_json::from_slice(host.request_body.as_deref().unwrap()).unwrap();
    assert_eq!(sent["stream_options"]["include_usage"], true);
    assert_eq!(host.request_headers_removed, ["content-length"]);
    assert_eq!(host.counted(Stat::UsageAsked), 1);
    // The caller's stream, without the usage event; the charge is its 42.
    let seen = String::from_utf8(host.client_body.clone()).unwrap();
    assert_eq!(
        seen,
        format!("{}data: [DONE]\n\n", String::from_utf8_lossy(content))
    );
    assert_eq!(host.response_headers_removed, ["content-length"]);
    assert_eq!(host.counted(Stat::CostsUnknown), 0);
    assert_eq!(f.count_of(&host.store, "10.0.0.1"), Some(42));
}

#[test]
fn a_caller_that_asked_or_does_not_stream_gets_its_body_and_stream_unchanged() {
    for body in [
        &br#"{"stream":true,"stream_options":{"include_usage":true}}"#[..],
        br#"{"stream":false}"#,
        b"prompt=hello&stream=true",
    ] {
        let f = Filter::new(&MockHost::new(T0).store, &config("")).unwrap();
        let mut host = host(body);
        host.upstream_headers
            .insert("content-type".into(), "text/event-stream".into());
        let usage = b"data: {\"choices\":[],\"usage\":{\"total_tokens\":42}}\n\n".to_vec();
        host.upstream_body = vec![usage.clone()];
        f.request(&mut host);
        assert_eq!(host.request_body_set, 0);
        assert_eq!(host.request_body.as_deref(), Some(body));
        assert_eq!(host.client_body, usage);
        assert_eq!(host.counted(Stat::UsageAsked), 0);
    }
}

#[test]
fn held_headers_wait_for_the_body_and_get_its_new_length() {
    let f = Filter::new(
        &MockHost::new(T0).store,
        &config(r#""hold_sign_in_headers":true,"#),
    )
    .unwrap();
    let body = br#"{"stream":true}"#;
    let mut host = host(body);
    let (first, last) = f.request(&mut host);
    assert_eq!((first, last), (Step::Pause, Some(Step::Continue)));
    let len = host.request_body.as_ref().map(Vec::len).unwrap();
    assert!(len > body.len());
    assert!(host.request_headers_removed.is_empty());
    assert!(host
        .request_headers_set
        .contains(&("content-length".to_string(), len.to_string())));
}

#[test]
fn a_request_without_a_body_is_decided_at_its_headers() {
    let f = Filter::new(&MockHost::new(T0).store, &config("")).unwrap();
    let mut host = MockHost::new(T0).from_address("10.0.0.1");
    let (first, last) = f.request(&mut host);
    assert_eq!((first, last), (Step::Continue, None));
    assert_eq!(host.body_reads_total(), 0);
    assert!(host.request_headers_removed.is_empty());
}

/// Issue 37, outcome 5: a cost in money. Tokens in and out are read apart
/// (Anthropic's stream names them in two events) and priced by the
/// request's model; its reservation is its ceiling and prompt at those
/// prices.
#[test]
fn tokens_in_and_out_are_priced_by_the_requests_model() {
    let config = r#"{"routes":[{"name":"llm","bounds":[
        {"name":"budget","per":"address","limit":1000000,"window":"P1D",
         "cost":{"input_json":"/message/usage/input_tokens","output_json":"/usage/output_tokens",
                 "ask_usage":false,"unit":"microdollars",
                 "prices":{"big":{"input":3,"output":15},"small":{"input":0.25,"output":1.25}}}}]}]}"#;
    let stream = |input: u32, output: u32| -> Vec<Vec<u8>> {
        vec![
            format!("event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"usage\":{{\"input_tokens\":{input},\"output_tokens\":1}}}}}}\n\n").into_bytes(),
            b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n".to_vec(),
            format!("event: message_delta\ndata: {{\"type\":\"message_delta\",\"usage\":{{\"output_tokens\":{output}}}}}\n\n").into_bytes(),
            b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".to_vec(),
        ]
    };
    for (model, want) in [
        // 1,000 in at 3, 500 out at 15.
        ("big", 1000 * 3 + 500 * 15),
        ("small", 250 + 625),
        // Another model: the table's highest prices.
        ("other", 1000 * 3 + 500 * 15),
    ] {
        let f = Filter::new(&MockHost::new(T0).store, config).unwrap();
        let body = format!(r#"{{"model":"{model}","max_tokens":2000,"stream":true}}"#);
        let mut host = host(body.as_bytes());
        host.upstream_headers
            .insert("content-type".into(), "text/event-stream".into());
        host.upstream_body = stream(1000, 500);
        f.request(&mut host);
        // Not rewritten: ask_usage is off for Anthropic's API.
        assert_eq!(host.request_body_set, 0);
        assert_eq!(f.count_of(&host.store, "10.0.0.1"), Some(want), "{model}");
    }
    // The reservation: the ceiling out and the prompt in, at the model's
    // prices (2,000 × 15 + 12 × 3 for "big").
    let f = Filter::new(&MockHost::new(T0).store, config).unwrap();
    let w = f.worker();
    let body = br#"{"model":"big","max_tokens":2000}"#;
    let mut host = host(body);
    let mut ex = crate::pipeline::Exchange::default();
    w.on_request(&mut host, &mut ex, false);
    assert_eq!(
        w.on_request_body(&mut host, &mut ex, body.len(), true),
        Step::Continue
    );
    assert_eq!(ex.reserved(), 2000 * 15 + body.len().div_ceil(4) as u32 * 3);
}

/// Issue 37, outcome 5: a bound per model, its key the request body's
/// `model`, read once: a model named twice or in another case is refused,
/// and one request's model never counts another's.
#[test]
fn a_bound_per_model_counts_each_model_apart() {
    let config = r#"{"routes":[{"name":"llm","bounds":[
        {"name":"tokens","per":"address","limit":1000000,"window":"PT1H",
         "cost":{"response_json":"/usage/total_tokens","reserve":1}},
        {"name":"calls","per":"model","limit":2,"window":"PT1H"}]}]}"#;
    let mut host = MockHost::new(T0);
    let f = Filter::new(&host.store, config).unwrap();
    let mut statuses = Vec::new();
    for (i, body) in [
        r#"{"model":"a"}"#,
        r#"{"model":"a"}"#,
        r#"{"model":"a"}"#,
        r#"{"model":"b"}"#,
        r#"{"model":"a","model":"b"}"#,
        r#"{"Model":"b"}"#,
    ]
    .iter()
    .enumerate()
    {
        // Each from another address: only the model is shared.
        host.now += 1;
        host.properties.insert(
            "source.address".into(),
            format!("10.0.1.{i}:41000").into_bytes(),
        );
        host.request_body = Some(body.as_bytes().to_vec());
        host.replies.clear();
        f.request(&mut host);
        statuses.push(host.replies.first().map_or(200, |r| r.status));
    }
    assert_eq!(statuses, [200, 200, 429, 200, 400, 400]);
}

#[test]
fn a_bound_per_model_needs_a_route_that_reads_its_requests() {
    let json = r#"{"routes":[{"name":"r","bounds":[
        {"per":"model","limit":2,"window":"PT1H"}]}]}"#;
    let errors = match crate::config::parse(json.as_bytes()) {
        Ok(_) => vec![],
        Err(e) => e.iter().map(|e| e.to_string()).collect(),
    };
    assert!(
        errors.iter().any(
            |e| e.starts_with("$.routes[0].bounds[0].per: ") && e.contains("\"model\" is read")
        ),
        "{errors:?}"
    );
}

/// A body its route reads is read at its end, or once more than the cap
/// has come (refused then, unread): never at a chunk while more may come.
#[test]
fn the_body_is_read_at_its_end_or_past_its_cap_never_at_a_chunk() {
    let f = Filter::new(&MockHost::new(T0).store, &config("")).unwrap();
    let w = f.worker();
    let body = br#"{"stream":false}"#;
    let mut h = host(body);
    let mut ex = Exchange::default();
    assert_eq!(w.on_request(&mut h, &mut ex, false), Step::Continue);
    assert_eq!(ex.waits_for(), Some(WaitFor::Request));
    assert_eq!(w.on_request_body(&mut h, &mut ex, 5, false), Step::Pause);
    assert_eq!(h.body_reads_total(), 0);
    assert_eq!(ex.waits_for(), Some(WaitFor::Request));
    let end = w.on_request_body(&mut h, &mut ex, body.len(), true);
    assert_eq!(end, Step::Continue);
    assert_eq!(h.body_reads_total(), 1);
    assert!(ex.waits_for().is_none());

    let mut h = host(&[b' '; 3000]);
    let mut ex = Exchange::default();
    assert_eq!(w.on_request(&mut h, &mut ex, false), Step::Continue);
    // At the cap: more may come.
    assert_eq!(w.on_request_body(&mut h, &mut ex, 2048, false), Step::Pause);
    assert!(h.replies.is_empty());
    assert_eq!(ex.waits_for(), Some(WaitFor::Request));
    // Past it: refused now, unread.
    assert_eq!(w.on_request_body(&mut h, &mut ex, 2049, false), Step::Pause);
    assert_eq!(h.replies.len(), 1);
    assert_eq!(h.replies[0].status, 413);
    assert_eq!(h.body_reads_total(), 0);
    assert!(ex.waits_for().is_none());
}

/// Trailers end a body: it is read at them, not waited for any longer.
#[test]
fn a_body_ended_by_trailers_is_read_at_them() {
    let f = Filter::new(&MockHost::new(T0).store, &config("")).unwrap();
    let w = f.worker();
    let body = br#"{"stream":false}"#;
    let mut h = host(body);
    let mut ex = Exchange::default();
    assert_eq!(w.on_request(&mut h, &mut ex, false), Step::Continue);
    let chunk = w.on_request_body(&mut h, &mut ex, body.len(), false);
    assert_eq!(chunk, Step::Pause);
    assert_eq!(h.body_reads_total(), 0);
    assert_eq!(w.on_request_trailers(&mut h, &mut ex), Step::Continue);
    assert_eq!(h.body_reads_total(), 1);
    assert!(ex.waits_for().is_none());
    assert!(h.replies.is_empty());
}

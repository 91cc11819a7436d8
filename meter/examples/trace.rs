//! Where a request's fuel goes: one steady request of variants 4, 5 and 6,
//! and of the sign-in call (bench/signin.sh F, fixed), traced: the fuel the
//! module spent from each callback's start or host call to the next.
//!
//! `cargo run -p ratebound-meter --example trace` (after `./build.sh`);
//! `-- stream`: one request of the meter's 1,000-event stream instead, its
//! spans summed by label (where an event's fuel goes).

use ratebound_meter::bench::{cost, one_address, refusing, rls_answer, signin, three_bounds};
use ratebound_meter::{address, load_module, token, Meter, JWT_SUB};

fn main() -> Result<(), String> {
    let wasm = load_module()?;
    if std::env::args().nth(1).as_deref() == Some("stream") {
        return stream(&wasm);
    }
    let variants = [
        ("4: one address bound", one_address(), false),
        ("5: route + address + JWT user", three_bounds(), true),
        ("6: refusing", refusing(), false),
        ("F: sign-in call, fixed", signin("fixed"), false),
    ];
    for (name, config, jwt) in variants {
        let mut m = Meter::new(&wasm, &config, |h| {
            h.properties
                .insert("source.address".into(), address(0).into_bytes());
            if jwt {
                let bearer = format!("Bearer {}", token("bench-user"));
                h.request_headers
                    .push(("authorization".into(), bearer.into_bytes()));
                h.properties.insert(JWT_SUB.into(), b"bench-user".to_vec());
            }
            h.request_headers
                .push(("x-login".into(), b"bench-1".to_vec()));
            // The service's answer to a sign-in's call, framed.
            let msg = rls_answer(&[(1_000_000_000, 999_999_999)]);
            h.answer_headers = vec![(":status".into(), b"200".to_vec())];
            h.answer_body = [&[0u8][..], &(msg.len() as u32).to_be_bytes(), &msg].concat();
            h.answer_trailers = vec![("grpc-status".into(), b"0".to_vec())];
        })?;
        for _ in 0..10 {
            m.request()?;
            m.advance(1)?;
        }
        let trace = m.trace()?;
        let total: u64 = trace.iter().map(|(_, f)| f).sum();
        println!("\n{name}: {total} fuel");
        for (span, fuel) in trace {
            println!("  {fuel:>7}  {span}");
        }
    }
    Ok(())
}

/// The meter's 1,000-event stream (meter/tests/budgets.rs), one request
/// traced: the spans summed by label, largest first.
fn stream(wasm: &[u8]) -> Result<(), String> {
    let usage = r#"{"response_json":"/usage/total_tokens","reserve":500,"unit":"tokens"}"#;
    let config = cost("benchcostsse1k", usage);
    let mut m = Meter::new(wasm, &config, |h| {
        h.properties
            .insert("source.address".into(), address(0).into_bytes());
    })?;
    m.response = vec![("content-type".into(), b"text/event-stream".to_vec())];
    m.body = ratebound_meter::bench::one_token_stream(1000);
    for _ in 0..3 {
        m.request()?;
        m.advance(1)?;
    }
    let mut sums: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    for (span, fuel) in m.trace()? {
        let e = sums.entry(span).or_default();
        e.0 += fuel;
        e.1 += 1;
    }
    let mut rows: Vec<_> = sums.into_iter().collect();
    rows.sort_by_key(|(_, (f, _))| std::cmp::Reverse(*f));
    let total: u64 = rows.iter().map(|(_, (f, _))| f).sum();
    println!("\n1,000-event stream: {total} fuel");
    for (span, (fuel, n)) in rows {
        println!("  {fuel:>10}  {n:>5}x  {span}");
    }
    Ok(())
}

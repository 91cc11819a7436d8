//! Where a request's fuel goes: one steady request of variants 4, 5 and 6,
//! and of the sign-in call (bench/signin.sh F, fixed), traced: the fuel the
//! module spent from each callback's start or host call to the next.
//!
//! `cargo run -p ratebound-meter --example trace` (after `./build.sh`).

use ratebound_meter::bench::{one_address, refusing, rls_answer, signin, three_bounds};
use ratebound_meter::{address, load_module, token, Meter, JWT_SUB};

fn main() -> Result<(), String> {
    let wasm = load_module()?;
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

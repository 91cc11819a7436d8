//! Bytes → the filter's configuration parser (what Envoy hands the filter
//! at configure time). Never panics; a refusal names where (a JSON path);
//! an accepted configuration compiles deterministically, fits the key
//! budget (it gets a lane per bound), and the console can explain it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ratebound::config::{parse, window_ms};
use ratebound::reading::{explain, warnings};
use ratebound_cli::render;
use ratebound::count::directory;
use ratebound::config::plan::Plan;
use ratebound::count::store::MemStore;

fuzz_target!(|data: &[u8]| {
    let config = match parse(data) {
        Ok(c) => c,
        Err(errors) => {
            assert!(!errors.is_empty(), "refused without a reason");
            for e in &errors {
                assert!(e.path.starts_with('$'), "error without a JSON path: {e}");
                assert!(
                    !e.message.is_empty(),
                    "error without a message at {}",
                    e.path
                );
            }
            return;
        }
    };
    // What validation promises the compiler.
    for r in &config.routes {
        let op_bounds = r.operations.iter().flat_map(|o| &o.bounds);
        for b in r.bounds.iter().chain(op_bounds) {
            assert!(
                (1..=u64::from(u32::MAX)).contains(&b.limit),
                "limit {}",
                b.limit
            );
            assert!(window_ms(&b.window).is_ok(), "window {:?}", b.window);
        }
    }
    let plan = Plan::compile(&config);
    assert_eq!(
        plan.hash,
        Plan::compile(&config).hash,
        "compiling twice, two hashes"
    );
    let again = parse(data).map(|c| Plan::compile(&c).hash);
    assert_eq!(again, Ok(plan.hash), "parsing twice, two hashes");
    let wants = plan.wants();
    let bounds: usize = plan.routes.iter().map(|r| r.bounds.len()).sum();
    assert_eq!(wants.len(), bounds, "a lane wanted per bound");
    for b in plan.routes.iter().flat_map(|r| &r.bounds) {
        assert!(b.rate.limit >= 1);
        assert!((1_000..=86_400_000).contains(&b.rate.window_ms));
        assert_eq!(b.rate.window_ms % 1_000, 0);
    }
    // As the filter activates it: parse checked the key budget, so with
    // nothing else alive it gets one lane per bound; a second worker joins
    // the same lanes and is not the first.
    let store = MemStore::new();
    let first = directory::register(&store, &plan.instance, plan.hash, &wants, 0, [1, 2]);
    let first = match first {
        Ok(r) => r.registered,
        Err(e) => panic!("accepted, then refused lanes in an empty store: {e}"),
    };
    assert!(first.first);
    assert_eq!(first.assigned.len(), wants.len(), "a lane per bound");
    let second = directory::register(&store, &plan.instance, plan.hash, &wants, 1, [3, 4]);
    assert!(
        matches!(&second, Ok(r) if !r.registered.first && r.registered.assigned == first.assigned),
        "a second worker gets other lanes"
    );
    // The filter logs the warnings at configure time; the CLI explains.
    let _ = warnings(&plan, None);
    let _ = warnings(&plan, Some(3));
    let _ = render::text(&explain::explain(&plan, Some(2)));
});

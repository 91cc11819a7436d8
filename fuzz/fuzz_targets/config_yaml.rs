//! Bytes (as the CLI reads a `.yaml` file, or stdin told apart by content)
//! → YAML turned into JSON within budgets → the filter's parser. Never
//! panics; a refusal names where; an accepted configuration compiles
//! deterministically.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ratebound_cli::input::{detect, load, Format};
use ratebound::config::plan::Plan;

fuzz_target!(|data: &[u8]| {
    let yaml = load(data, Format::Yaml);
    match &yaml {
        Ok(config) => {
            let plan = Plan::compile(config);
            assert_eq!(plan.hash, Plan::compile(config).hash);
        }
        Err(errors) => {
            assert!(!errors.is_empty(), "refused without a reason");
            for e in errors {
                assert!(e.path.starts_with('$'), "error without a JSON path: {e}");
                assert!(
                    !e.message.is_empty(),
                    "error without a message at {}",
                    e.path
                );
            }
        }
    }
    // stdin: JSON or YAML by the first character.
    let _ = load(data, detect("-", data));
});

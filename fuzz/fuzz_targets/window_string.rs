//! A window as written → milliseconds. Accepted only as whole seconds from
//! one second to one day, and the same duration written plainly
//! (`PT{seconds}S`) is accepted as the same window.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ratebound::config::window_ms;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match window_ms(s) {
        Ok(ms) => {
            assert_eq!(ms % 1_000, 0, "{s:?} → {ms} ms: not whole seconds");
            assert!(
                (1_000..=86_400_000).contains(&ms),
                "{s:?} → {ms} ms: outside PT1S..P1D"
            );
            let plain = format!("PT{}S", ms / 1_000);
            assert_eq!(
                window_ms(&plain),
                Ok(ms),
                "{s:?} → {ms} ms, but {plain:?} is not"
            );
        }
        Err(e) => assert!(!e.to_string().is_empty(), "{s:?} refused without a reason"),
    }
});

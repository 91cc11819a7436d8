//! Request paths → `ratebound::config::normalize::path`: see
//! `ratebound_fuzz::path_normalise` for what is checked. Not built until
//! the normaliser is on main (its `[[bin]]` in Cargo.toml is commented).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ratebound_fuzz::path_normalise::check;

fuzz_target!(|data: &[u8]| {
    // Envoy hands the filter `:path` as a string; bytes that are not UTF-8
    // never reach the normaliser.
    if let Ok(raw) = std::str::from_utf8(data) {
        check(ratebound::config::normalize::path, raw);
    }
});

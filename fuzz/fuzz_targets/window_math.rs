//! The sliding-window arithmetic on a monotonic clock: see
//! `ratebound_fuzz::window_math` for what is checked.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ratebound_fuzz::window_math::{run, Input};

fuzz_target!(|input: Input| run(&input, false));

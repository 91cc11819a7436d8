//! The sliding-window arithmetic on a clock that sometimes steps back (a
//! stored window ahead of `now`): the checks that need no monotonic history.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ratebound_fuzz::window_math::{run, Input};

fuzz_target!(|input: Input| run(&input, true));

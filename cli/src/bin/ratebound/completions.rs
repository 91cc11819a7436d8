//! `ratebound completions SHELL`: the shell's completion script.

use crate::args;
use crate::output::{out, VALID};

pub fn run(shell: clap_complete::Shell) -> u8 {
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut args::command(), "ratebound", &mut buf);
    out(&String::from_utf8_lossy(&buf));
    VALID
}

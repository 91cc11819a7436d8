//! `ratebound version`: the version and the git commit built from.

use crate::output::{out, VALID};

pub fn run() -> u8 {
    out(&format!(
        "ratebound {} (git {})\n",
        env!("CARGO_PKG_VERSION"),
        env!("RATEBOUND_GIT_COMMIT")
    ));
    VALID
}

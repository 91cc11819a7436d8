//! `ratebound rls-config`: the envoyproxy/ratelimit configuration for a
//! configuration's installation bounds.

use crate::args::Format;
use crate::load::{load, name};
use crate::output::{err, out, INVALID, USAGE, VALID};
use ratebound::console::rls_config;

pub fn run(file: &str) -> u8 {
    match load(file, Format::Text) {
        Err(code) => code,
        Ok(loaded) => {
            let [(doc, config)] = &loaded.configs[..] else {
                err(&format!(
                    "ratebound: {file} holds {} configurations; rls-config reads one\n",
                    loaded.configs.len()
                ));
                return USAGE;
            };
            match rls_config::generate(config, &name(file, doc)) {
                Some(yaml) => {
                    out(&yaml);
                    VALID
                }
                None => {
                    err(&format!(
                        "ratebound: {} has no rate_limit_service: no bound is counted by the rate-limit service\n",
                        name(file, doc)
                    ));
                    INVALID
                }
            }
        }
    }
}
